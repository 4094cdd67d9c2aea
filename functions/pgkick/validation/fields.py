"""A job's fields one at a time: its names (queue, task, group, rate key), its payload, its
attempts, priority and unique key; each refused with the field named.

Why strict: a payload that cannot round-trip through jsonb (NaN, a lone surrogate, a NUL
character, non-string keys that JSON would silently turn into strings, a float jsonb would
read back as another integer) or a name a worker can never match must fail in the caller's
hands, and not as a row that fails later or runs with different data; the bounds match the
schema's checks. Why apart from `job_spec` (the package's face): the same checks serve one
field alone too (a task's declared attempts, a spawned child's payload, the CLI's queue).
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from pgkick.errors import InvalidArgument, InvalidArgumentType

MAX_NAME_LENGTH = 128
MAX_ATTEMPTS_LIMIT = 1_000
# Priorities: higher runs first; 0 by default. A small range (a smallint column checked
# by the schema) keeps the ready index narrow and the meaning obvious.
MIN_PRIORITY, MAX_PRIORITY = -100, 100
MAX_UNIQUE_KEY_LENGTH = 512
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
# The same encoder's C core, made once: JSONEncoder.encode builds it again for every
# payload (4/5 of a small payload's encoding time; issue 32). No circular-reference
# markers: _check_keys has already refused a payload nested over 500 deep, cycles included.
_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # what iterencode uses
_C_ENCODER = (
    _C_MAKE_ENCODER(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if _C_MAKE_ENCODER is not None
    else None
)


def _encode(payload: object) -> str:
    if _C_ENCODER is None:  # a Python without the _json accelerator
        return _ENCODER.encode(payload)
    return "".join(_C_ENCODER(payload, 0))


# Names already checked: enqueue_many repeats a few queue and task names 100,000 times.
_GOOD_NAMES: set[str] = set()


def check_name(field: str, value: object) -> str:
    if type(value) is str and value in _GOOD_NAMES:
        return value
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{field}: must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"{field}: {len(value)} characters, at most {MAX_NAME_LENGTH} allowed"
        )
    if not value.isprintable() or value != value.strip():
        raise InvalidArgument(
            f"{field}: {value!r} has control characters or surrounding spaces; use printable text"
        )
    if type(value) is str and len(_GOOD_NAMES) < 10_000:
        _GOOD_NAMES.add(value)
    return value


def payload_json(payload: object, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """The payload as compact JSON text that jsonb will store and give back unchanged."""
    _check_keys(payload)
    try:
        text = _encode(payload)
    except ValueError:  # Python will not write an int of more than 4,300 digits as text
        raise InvalidArgument("payload: an integer has more than 4,300 digits") from None
    except TypeError as exc:
        raise InvalidArgumentType(f"payload: {exc}") from None
    except RecursionError:
        raise InvalidArgument("payload: nested too deeply to be JSON") from None
    try:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(
            "payload: contains a lone surrogate, which is not valid text"
        ) from None
    if "\\u0000" in text and _NUL.search(text):
        raise InvalidArgument(
            "payload: contains a NUL character (\\u0000), which jsonb cannot store"
        )
    if size > max_bytes:
        raise InvalidArgument(
            f"payload: {size} bytes as JSON, larger than the limit of {max_bytes}"
        )
    return text


def _check_keys(value: object, depth: int = 0) -> None:
    """Non-string keys would come back as strings: refuse rather than change the data."""
    if depth > 500:
        raise InvalidArgument("payload: nested too deeply to be JSON")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgumentType(f"payload: object keys must be strings, got {key!r}")
            if type(item) not in _LEAVES:  # plain strings, ints, bools, None need no look
                _check_keys(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            if type(item) not in _LEAVES:
                _check_keys(item, depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument("payload: NaN and Infinity are not JSON")
        if abs(value) >= _EXACT_FLOATS and Decimal(repr(value)) != Decimal(value):
            # jsonb keeps the decimal text (1e23 -> 100000000000000000000000), which reads
            # back as an int that differs from the float: refuse rather than change it.
            raise InvalidArgument(
                f"payload: the float {value!r} would read back as the integer "
                f"{Decimal(repr(value)):f}; pass an int or a string"
            )


_LEAVES = frozenset({str, int, bool, type(None)})
_EXACT_FLOATS = 2.0**53  # below this, a whole float's shortest repr is its exact value


def check_max_attempts(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentType(f"max_attempts: must be an integer, got {type(value).__name__}")
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidArgument(f"max_attempts: {value} is outside 1..{MAX_ATTEMPTS_LIMIT}")
    return value


def check_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentType(f"priority: must be an integer, got {type(value).__name__}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidArgument(
            f"priority: {value} is outside {MIN_PRIORITY}..{MAX_PRIORITY} (higher runs first)"
        )
    return value


def check_group(value: object) -> str | None:
    """None (no group) or a name like a queue's."""
    return None if value is None else check_name("group", value)


def check_rate_key(value: object) -> str | None:
    """None (the queue's own rate bucket) or a name like a queue's (a tenant, an API host)."""
    return None if value is None else check_name("rate_key", value)


def check_unique_key(value: object) -> str | None:
    """None, or printable text of at most MAX_UNIQUE_KEY_LENGTH characters (no NUL)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgumentType(f"unique_key: must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidArgument("unique_key: must not be empty (pass None for no key)")
    if len(value) > MAX_UNIQUE_KEY_LENGTH:
        raise InvalidArgument(
            f"unique_key: {len(value)} characters, at most {MAX_UNIQUE_KEY_LENGTH} allowed"
        )
    if not value.isprintable():
        raise InvalidArgument(
            f"unique_key: {value[:80]!r} has control characters; use printable text"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            "unique_key: contains a lone surrogate, which is not valid text"
        ) from None
    return value
