"""Checks on what a producer hands pgkick, before anything is written.

Why strict: a job row is a promise that some worker will run it. A payload
that cannot round-trip through jsonb (NaN, a lone surrogate, a NUL character,
non-string keys that JSON would silently turn into strings) or a name a worker
can never match must fail in the caller's hands, with the field named, and not
as a row that fails later or runs with different data.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta
from typing import NamedTuple

MAX_NAME_LENGTH = 128
MAX_ATTEMPTS_LIMIT = 1_000
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_NO_DELAY = timedelta(0)
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
# Names already checked: enqueue_many repeats a few queue and task names 100,000 times.
_GOOD_NAMES: set[str] = set()


class JobSpec(NamedTuple):
    """One validated job, ready for the insert statement (a tuple: cheap to make in bulk)."""

    queue: str
    task: str
    payload_json: str
    run_at: datetime | None
    delay: timedelta
    max_attempts: int


def check_name(field: str, value: object) -> str:
    if type(value) is str and value in _GOOD_NAMES:
        return value
    if not isinstance(value, str):
        raise TypeError(f"{field}: must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{field}: must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{field}: {len(value)} characters, at most {MAX_NAME_LENGTH} allowed")
    if not value.isprintable() or value != value.strip():
        raise ValueError(
            f"{field}: {value!r} has control characters or surrounding spaces; use printable text"
        )
    if type(value) is str and len(_GOOD_NAMES) < 10_000:
        _GOOD_NAMES.add(value)
    return value


def payload_json(payload: object, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """The payload as compact JSON text that jsonb will store and give back unchanged."""
    _check_keys(payload)
    try:
        text = _ENCODER.encode(payload)
    except ValueError as exc:  # NaN or Infinity
        raise ValueError(f"payload: {exc} (NaN and Infinity are not JSON)") from None
    except TypeError as exc:
        raise TypeError(f"payload: {exc}") from None
    except RecursionError:
        raise ValueError("payload: nested too deeply to be JSON") from None
    try:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("payload: contains a lone surrogate, which is not valid text") from None
    if "\\u0000" in text and _NUL.search(text):
        raise ValueError("payload: contains a NUL character (\\u0000), which jsonb cannot store")
    if size > max_bytes:
        raise ValueError(f"payload: {size} bytes as JSON, larger than the limit of {max_bytes}")
    return text


def _check_keys(value: object, depth: int = 0) -> None:
    """Non-string keys would come back as strings: refuse rather than change the data."""
    if depth > 500:
        raise ValueError("payload: nested too deeply to be JSON")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"payload: object keys must be strings, got {key!r}")
            if type(item) not in _LEAVES:  # plain strings, ints, bools, None need no look
                _check_keys(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            if type(item) not in _LEAVES:
                _check_keys(item, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError("payload: NaN and Infinity are not JSON")


_LEAVES = frozenset({str, int, bool, type(None)})


def check_max_attempts(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_attempts: must be an integer, got {type(value).__name__}")
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise ValueError(f"max_attempts: {value} is outside 1..{MAX_ATTEMPTS_LIMIT}")
    return value


def check_schedule(run_at: object, delay: object) -> tuple[datetime | None, timedelta]:
    """At most one of run_at (timezone-aware) and delay (seconds or timedelta, >= 0)."""
    if run_at is None and delay is None:
        return None, _NO_DELAY
    if run_at is not None and delay is not None:
        raise ValueError("run_at and delay: give one or the other, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise TypeError(f"run_at: must be a datetime, got {type(run_at).__name__}")
        if run_at.tzinfo is None or run_at.utcoffset() is None:
            raise ValueError(
                f"run_at: {run_at.isoformat()} is naive; pass a timezone-aware datetime "
                "(e.g. datetime.now(UTC) + timedelta(minutes=5))"
            )
        return run_at, timedelta(0)
    if delay is None:
        return None, _NO_DELAY
    if isinstance(delay, bool) or not isinstance(delay, int | float | timedelta):
        raise TypeError(f"delay: must be seconds or a timedelta, got {type(delay).__name__}")
    span = delay if isinstance(delay, timedelta) else timedelta(seconds=delay)
    if span < timedelta(0):
        raise ValueError(f"delay: {span} is negative")
    return None, span


def job_spec(
    payload: object,
    *,
    task: object,
    queue: object = "default",
    run_at: object = None,
    delay: object = None,
    max_attempts: object = 5,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> JobSpec:
    """Validate every field of one job; raise ValueError/TypeError naming the first bad one."""
    when, span = check_schedule(run_at, delay)
    return JobSpec(
        queue=check_name("queue", queue),
        task=check_name("task", task),
        payload_json=payload_json(payload, max_payload_bytes),
        run_at=when,
        delay=span,
        max_attempts=check_max_attempts(max_attempts),
    )
