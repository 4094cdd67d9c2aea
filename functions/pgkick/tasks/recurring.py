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
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.tasks.registry import TaskFunction, registry
from pgkick.validation import check_max_attempts, check_name, payload_json

SCHEDULE_PREFIX = "pgkick.periodic."  # what sync owns: no kick or rescue name has a dot
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # the scheduler fills it in, per tick
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")  # 64 characters a schedule name may have
_RATE = re.compile(r"^rate\((\d{1,6}) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
# EventBridge's six fields: minutes hours day-of-month month day-of-week year.
_CRON_FIELDS = (
    ("minutes", r"[0-9,\-*/]+"),
    ("hours", r"[0-9,\-*/]+"),
    ("day-of-month", r"[0-9,\-*?/LW]+"),
    ("month", r"[0-9A-Za-z,\-*/]+"),
    ("day-of-week", r"[0-9A-Za-z,\-*?/L#]+"),
    ("year", r"[0-9,\-*/]+"),
)


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


def check_expression(expression: object) -> str:
    """A `cron(...)` or `rate(...)` EventBridge Scheduler accepts; ValueError naming why not."""
    if not isinstance(expression, str):
        raise InvalidArgumentType(f"schedule: must be a string, got {type(expression).__name__}")
    rate = _RATE.match(expression)
    if rate:
        value, unit = int(rate.group(1)), rate.group(2)
        single = unit.rstrip("s")
        if value < 1 or (value == 1) != (unit == single):
            raise InvalidArgument(
                f"schedule: {expression!r}: use rate(1 {single}) or rate(N {single}s), N > 1"
            )
        return expression
    cron = _CRON.match(expression)
    if not cron:
        raise InvalidArgument(
            f"schedule: {expression!r} is neither cron(min hour day-of-month month "
            "day-of-week year) nor rate(N minutes|hours|days)"
        )
    fields = cron.group(1).split()
    if len(fields) != len(_CRON_FIELDS):
        raise InvalidArgument(
            f"schedule: {expression!r} has {len(fields)} fields; EventBridge cron has 6: "
            + " ".join(name for name, _ in _CRON_FIELDS)
        )
    for value, (name, allowed) in zip(fields, _CRON_FIELDS, strict=True):
        if not re.fullmatch(allowed, value):
            raise InvalidArgument(f"schedule: {expression!r}: {name} field {value!r} is not valid")
    if (fields[2] == "?") == (fields[4] == "?"):
        raise InvalidArgument(
            f"schedule: {expression!r}: exactly one of day-of-month and day-of-week must be '?'"
        )
    return expression


def check_timezone(timezone: object) -> str:
    if not isinstance(timezone, str):
        raise InvalidArgumentType(f"timezone: must be a string, got {type(timezone).__name__}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(f"timezone: {timezone!r} is not an IANA time zone name") from None
    return timezone


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
    name = task if name is None else name
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(f"periodic name: {name!r} must be 1-48 of A-Z a-z 0-9 _ -")
    return into.add(
        Periodic(
            name=name,
            expression=check_expression(expression),
            timezone=check_timezone(timezone),
            task=check_name("task", task),
            queue=check_name("queue", queue),
            payload_json=payload_json({} if payload is None else payload),
            max_attempts=check_max_attempts(max_attempts),
        )
    )


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
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(f"tick event: periodic {str(name)[:100]!r} is not a periodic name")
    try:
        when = datetime.fromisoformat(str(tick).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"tick event: tick {str(tick)[:100]!r} is not an ISO time") from None
    if when.tzinfo is None:
        raise InvalidArgument(f"tick event: tick {tick!r} has no time zone")
    return name, when.astimezone(UTC)
