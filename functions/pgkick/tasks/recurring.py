"""Periodic tasks declared in code, run by EventBridge Scheduler: cron with no process running.

Why the scheduler and not a loop: every peer's cron needs a live process (a
worker or a beat), and such a process silently stopping is the common failure
(procrastinate #1495/#1464). Here each declaration becomes a recurring schedule
(`pgkick schedules sync`, pgkick.aws.schedules) that invokes the worker with a tick
event; the worker inserts the job and drains its queue. Nothing polls.

Why a tick key: the scheduler delivers at least once. The event carries the
scheduled time (`<aws.scheduler.scheduled-time>`), and the worker records
(name, scheduled time) in `periodic_ticks` in the same statement that inserts
the job, so a tick delivered twice inserts one job.

    @pgkick.periodic("cron(0 3 * * ? *)", timezone="Europe/Paris", task="nightly")
    def nightly(payload): ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pgkick.errors import InvalidArgument
from pgkick.tasks.expressions import check_expression, check_timezone
from pgkick.tasks.registry import TaskFunction, registry
from pgkick.validation import check_max_attempts, check_name, payload_json

SCHEDULE_PREFIX = "pgkick.periodic."  # what sync owns: no kick or rescue name has a dot
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # the scheduler fills it in, per tick
# 64 characters a schedule name may have, less the prefix. Matched whole (fullmatch): a
# `$` would match before a final newline, and AWS refuses a name holding one.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")


def check_periodic_name(name: object) -> str:
    """`name` when it makes a schedule name AWS accepts; InvalidArgument otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgument(f"periodic name: {name!r} must be 1-48 of A-Z a-z 0-9 _ -")
    return name


# How long a tick's key must outlive its scheduled time: as long as the tick can be
# delivered again, whatever the job retention (PGKICK_RETENTION_DAYS may be 0). The longest
# way back, each step at its ceiling:
SCHEDULER_MAX_EVENT_AGE = timedelta(seconds=86_400)  # Scheduler's RetryPolicy
# MaximumEventAgeInSeconds, at most (botocore's scheduler model; AWS's default): it
# redelivers a tick it thinks undelivered for up to a day after the scheduled time;
LAMBDA_MAX_EVENT_AGE = timedelta(seconds=21_600)  # Lambda's asynchronous queue, at most
# (template.yaml's KickMaxEventAgeSeconds MaxValue; Lambda's own ceiling): a delivered tick
# whose invocation failed is retried from it;
FAILED_KICKS_RETENTION = timedelta(seconds=1_209_600)  # template.yaml's FailedKicksQueue
# MessageRetentionPeriod (14 days): a dead-lettered tick, or one Lambda gave up on, waits
# there until the worker runs it (pgkick.aws.failed_kicks), as late as that.
TICK_KEYS_KEPT = SCHEDULER_MAX_EVENT_AGE + LAMBDA_MAX_EVENT_AGE + FAILED_KICKS_RETENTION


@dataclass(frozen=True, slots=True)
class Periodic:
    """One declaration: which task to enqueue, on which queue, when."""

    name: str
    expression: str
    timezone: str
    task: str
    queue: str
    payload_json: str = "{}"
    max_attempts: int = 5

    @property
    def schedule_name(self) -> str:
        return SCHEDULE_PREFIX + self.name

    def check(self) -> Periodic:
        """Itself, when its name, expression and time zone are ones EventBridge Scheduler
        accepts (pgkick.tasks.expressions); InvalidArgument naming the part it would refuse.
        The name too: a Periodic built by hand reaches sync without declare's check."""
        check_periodic_name(self.name)
        check_expression(self.expression)
        check_timezone(self.timezone)
        return self

    def event(self) -> dict[str, Any]:
        """The schedule's Input: the tick's key is the scheduler's own scheduled time."""
        return {"periodic": self.name, "tick": SCHEDULED_TIME}


@dataclass
class PeriodicRegistry:
    """The declarations this deployment owns (what `pgkick schedules sync` makes true)."""

    declared: dict[str, Periodic] = field(default_factory=dict)

    def add(self, periodic: Periodic) -> Periodic:
        known = self.declared.get(periodic.name)
        if known is not None and known != periodic:
            raise InvalidArgument(f"periodic {periodic.name!r} is already declared differently")
        self.declared[periodic.name] = periodic
        return periodic

    def get(self, name: str) -> Periodic | None:
        return self.declared.get(name)


periodic_registry = PeriodicRegistry()


def declare(
    expression: str,
    *,
    task: str,
    name: str | None = None,
    timezone: str = "UTC",
    queue: str = "default",
    payload: Any = None,
    max_attempts: int = 5,
    into: PeriodicRegistry = periodic_registry,
) -> Periodic:
    """Validate and record one periodic task; raises before anything is declared."""
    if name is None:
        name = _default_name(task)
    return into.add(
        Periodic(
            name=check_periodic_name(name),
            expression=check_expression(expression),
            timezone=check_timezone(timezone),
            task=check_name("task", task),
            queue=check_name("queue", queue),
            payload_json=payload_json({} if payload is None else payload),
            max_attempts=check_max_attempts(max_attempts),
        )
    )


def _default_name(task: str) -> str:
    """The task's name as the schedule's, when it can be one. A task name may hold dots and
    200 characters, a schedule's name may not; refused, the user is told to pass name=,
    not that a "periodic name" they never wrote is wrong."""
    if isinstance(task, str) and not _NAME.fullmatch(task):
        raise InvalidArgument(
            f"periodic name: none given, and the task's, {task!r}, is not 1-48 of "
            "A-Z a-z 0-9 _ -: pass name='...' (the schedule's name, pgkick.periodic.<name>)"
        )
    return task


def periodic(
    expression: str, *, task: str, timezone: str = "UTC", queue: str = "default", **options: Any
) -> Callable[[TaskFunction], TaskFunction]:
    """Decorator: register `fn` as `task` and declare its schedule (see the module's doc)."""
    declared = declare(expression, task=task, timezone=timezone, queue=queue, **options)

    def register(fn: TaskFunction) -> TaskFunction:
        return registry.task(declared.task)(fn)

    return register


def parse_tick(event: Mapping[str, Any]) -> tuple[str, datetime]:
    """The periodic name and scheduled time a tick event carries; ValueError otherwise."""
    name, tick = event.get("periodic"), event.get("tick")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgument(f"tick event: periodic {str(name)[:100]!r} is not a periodic name")
    try:
        when = datetime.fromisoformat(str(tick).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"tick event: tick {str(tick)[:100]!r} is not an ISO time") from None
    if when.tzinfo is None:
        raise InvalidArgument(f"tick event: tick {tick!r} has no time zone")
    try:
        return name, when.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before year 1 in UTC
        raise InvalidArgument(f"tick event: tick {tick!r} is out of range in UTC") from None
