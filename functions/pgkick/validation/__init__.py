"""Checks on what a producer hands pgkick, before anything is written.

Names, payloads, attempts, priorities and keys in `fields`; when a job is due in
`schedule`, debounce and throttle in `flow`, the jobs it waits for in `dependencies`;
`job_spec` here puts them together, for one job or each of enqueue_many's, and checks a
task's name against the registry when the process knows every task (`known_task`).

Why strict: a job row is a promise that some worker will run it. A payload
that cannot round-trip through jsonb (NaN, a lone surrogate, a NUL character,
non-string keys that JSON would silently turn into strings) or a name a worker
can never match must fail in the caller's hands, with the field named, and not
as a row that fails later or runs with different data.
"""

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TypedDict, Unpack

from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.validation.dependencies import check_after
from pgkick.validation.fields import (
    _GOOD_NAMES,
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_ATTEMPTS_LIMIT,
    MAX_NAME_LENGTH,
    MAX_PRIORITY,
    MAX_UNIQUE_KEY_LENGTH,
    MIN_PRIORITY,
    check_group,
    check_max_attempts,
    check_name,
    check_priority,
    check_rate_key,
    check_unique_key,
    payload_json,
)
from pgkick.validation.flow import check_flow
from pgkick.validation.schedule import NO_DELAY, check_schedule

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "JOB_FIELDS",
    "MAX_ATTEMPTS_LIMIT",
    "MAX_NAME_LENGTH",
    "MAX_PRIORITY",
    "MAX_UNIQUE_KEY_LENGTH",
    "MIN_PRIORITY",
    "NO_DELAY",
    "EnqueueOptions",
    "JobSpec",
    "check_after",
    "check_flow",
    "check_group",
    "check_max_attempts",
    "check_name",
    "check_priority",
    "check_rate_key",
    "check_schedule",
    "check_unique_key",
    "job_spec",
    "job_spec_of",
    "known_task",
    "payload_json",
]

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


def _check_task(value: object) -> str:
    name = check_name("task", value)
    if known_task is not None:
        known_task(name)
    return name


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
