"""Checks on what a producer hands pgkick, before anything is written.

Names, payloads, attempts, priorities and keys here; when a job is due in `schedule`,
debounce and throttle in `flow`, the jobs it waits for in `dependencies`; `job_spec`
puts them together.

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
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple, TypedDict, Unpack

from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.validation.dependencies import check_after
from pgkick.validation.flow import check_flow
from pgkick.validation.schedule import NO_DELAY, check_schedule

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
# Set by pgkick.load_tasks(): this process knows every task, so an unknown name is refused
# (pgkick.tasks.registry). None: any well-formed name goes (the worker may know it).
known_task: Callable[[str], None] | None = None


class EnqueueOptions(TypedDict, total=False):
    """Per-job options, as every enqueue form takes them (checked by `job_spec`)."""

    queue: str
    run_at: datetime | None
    delay: float | timedelta | None
    max_attempts: int
    priority: int
    group: str | None
    unique_key: str | None
    # Flow control through the unique key (migration 0015; docs/guide/debounce.md).
    debounce: float | timedelta | None
    max_delay: float | timedelta | None
    throttle: float | timedelta | None
    # Jobs this one waits for (issue 34): ids, or (id, policy) pairs; see check_after.
    after: Sequence[int | tuple[int, str]] | Mapping[int, str] | None
    # The key a queue's rate limit counts this job's starts under (migration 0014).
    rate_key: str | None


# What one job of enqueue_many may hold: a payload, a task, and the options
JOB_FIELDS = frozenset({"payload", "task"} | EnqueueOptions.__optional_keys__)


class JobSpec(NamedTuple):
    """One validated job, ready for the insert statement (a tuple: cheap to make in bulk)."""

    queue: str
    task: str
    payload_json: str
    run_at: datetime | None
    delay: timedelta
    max_attempts: int
    priority: int = 0
    group: str | None = None
    unique_key: str | None = None
    # The W3C trace context of the span that enqueued the job (pgkick.producer.trace_context),
    # stored in its own columns; None without OpenTelemetry or an active span.
    traceparent: str | None = None
    tracestate: str | None = None
    # Debounce or throttle (at most one, with a unique key): `check_flow`.
    debounce: timedelta | None = None
    max_delay: timedelta | None = None
    throttle: timedelta | None = None

    @property
    def flow(self) -> bool:
        """Debounced or throttled: inserted through job_insert_flow, one key at a time."""
        return self.debounce is not None or self.throttle is not None

    def flow_params(self) -> dict[str, Any]:
        """job_insert_flow's parameters: the insert's, and the periods."""
        return {
            **self.insert_params(),
            "debounce": self.debounce,
            "max_delay": self.max_delay,
            "throttle": self.throttle,
        }

    # The parents it waits for, each with its policy (check_after); () for most jobs.
    after: tuple[tuple[int, str], ...] = ()

    # The key a queue's rate limit counts this job's starts under (None: the queue's own).
    rate_key: str | None = None

    def insert_params(self) -> dict[str, Any]:
        """The insert statements' parameters (job_insert, job_insert_unique), in one place."""
        return {
            "queue": self.queue,
            "task": self.task,
            "payload": self.payload_json,
            "run_at": self.run_at,
            "delay": self.delay,
            "max_attempts": self.max_attempts,
            "priority": self.priority,
            "group_key": self.group,
            "unique_key": self.unique_key,
            "traceparent": self.traceparent,
            "tracestate": self.tracestate,
            "rate_key": self.rate_key,
        }


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


def _check_task(value: object) -> str:
    name = check_name("task", value)
    if known_task is not None:
        known_task(name)
    return name


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


def job_spec(
    payload: object,
    *,
    task: object,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    **options: Unpack[EnqueueOptions],
) -> JobSpec:
    """Validate every field of one job; raise ValueError/TypeError naming the first bad one."""
    unknown = options.keys() - EnqueueOptions.__optional_keys__
    if unknown:  # as a signature with these keywords would refuse them
        raise InvalidArgumentType(f"unexpected keyword argument {sorted(unknown)[0]!r}")
    when, span = check_schedule(options.get("run_at"), options.get("delay"))
    unique_key = check_unique_key(options.get("unique_key"))
    debounce, max_delay, throttle = check_flow(options, unique_key)
    after = check_after(options.get("after"))
    rate_key = check_rate_key(options.get("rate_key"))
    if (debounce or throttle) and (after or rate_key):
        # job_insert_flow (0015) may answer with a job inserted earlier, under its own
        # parents and rate key: a second call's would be silently dropped.
        raise InvalidArgument(
            f"{'debounce' if debounce else 'throttle'}= cannot be combined with "
            f"{'after' if after else 'rate_key'}= on one job: a burst answers with the "
            "key's existing job, which keeps its own; enqueue without one of them"
        )
    return JobSpec(
        queue=check_name("queue", options.get("queue", "default")),
        task=_check_task(task),
        payload_json=payload_json(payload, max_payload_bytes),
        run_at=when,
        delay=span,
        max_attempts=check_max_attempts(options.get("max_attempts", 5)),
        priority=check_priority(options.get("priority", 0)),
        group=check_group(options.get("group")),
        unique_key=unique_key,
        debounce=debounce,
        max_delay=max_delay,
        throttle=throttle,
        after=after,
        rate_key=rate_key,
    )


def job_spec_of(job: Mapping[str, Any], max_bytes: int, index: int) -> JobSpec:
    """One job of enqueue_many (a mapping of enqueue's arguments), checked; an error names
    jobs[index]."""
    try:
        if type(job) is not dict and not isinstance(job, Mapping):
            raise InvalidArgumentType(
                f"must be a mapping of enqueue's arguments, got {type(job).__name__}"
            )
        if not job.keys() <= JOB_FIELDS:
            raise InvalidArgumentType(f"unknown fields {sorted(set(job) - JOB_FIELDS)}")
        if "payload" not in job or "task" not in job:
            raise InvalidArgumentType("needs payload and task")
        if len(job) == 2 or job.keys() <= _PLAIN_FIELDS:
            return _plain_spec(job, max_bytes)
        options: Any = {k: v for k, v in job.items() if k != "payload" and k != "task"}
        return job_spec(job["payload"], task=job["task"], max_payload_bytes=max_bytes, **options)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"jobs[{index}]: {exc}") from None


# enqueue_many's common job: a payload, a task, maybe a queue, every other option at its
# default. `_plain_spec` runs the same checks as job_spec on those three fields, in the
# same order (queue, task, payload: the same first error), and skips only the look at
# options the job does not have; it builds the tuple directly (a NamedTuple's keywords
# cost more than the checks). tests/test_validation_bulk.py holds it equal to job_spec.
_PLAIN_FIELDS = frozenset({"payload", "task", "queue"})
_PLAIN_TAIL = tuple(JobSpec._field_defaults[f] for f in JobSpec._fields[6:])
_NEW_SPEC = tuple.__new__


def _plain_spec(job: Mapping[str, Any], max_bytes: int) -> JobSpec:
    queue = job.get("queue", "default")
    return _NEW_SPEC(
        JobSpec,
        (
            queue if type(queue) is str and queue in _GOOD_NAMES else check_name("queue", queue),
            _check_task(job["task"]),
            payload_json(job["payload"], max_bytes),
            None,
            NO_DELAY,
            5,
            *_PLAIN_TAIL,
        ),
    )
