"""EventBridge Scheduler, stood in: schedules kept by group and name, each fired by one timer.

Why a timer per schedule and not a loop: nothing polls, locally either. As the
scheduler does, a one-time `at(...)` schedule fires within the minute after its
time (a seeded offset of 0-59 s; `fast=True`, the labelled kindness, fires at the
whole second) and, with ActionAfterCompletion DELETE, is deleted once fired;
`rate(...)` and `cron(...)` schedules fire at each tick (pgkick_dev.local.cron),
within the minute too. Firing sends the target's Input to the target function's
asynchronous queue, as a new chain (the scheduler's invocations have no lineage).
"""

from __future__ import annotations

import json
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from pgkick_dev.devserver.clock import Cancellable, Clock
from pgkick_dev.devserver.timeline import Timeline
from pgkick_dev.local.cron import next_tick

ACCOUNT_ARN = "arn:aws:scheduler:us-east-1:123456789012"


class SchedulerError(Exception):
    """An API error: `code` is the exception name boto3 raises, `status` the HTTP status."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


@dataclass
class Schedule:
    name: str
    group: str
    body: dict[str, Any]  # as created (ScheduleExpression, Target, ...)
    created: float
    timer: Cancellable | None = None
    fired: int = 0
    due: float | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "Arn": f"{ACCOUNT_ARN}:schedule/{self.group}/{self.name}",
            "Name": self.name,
            "GroupName": self.group,
            "State": self.body.get("State", "ENABLED"),
            "ScheduleExpressionTimezone": "UTC",
            "ActionAfterCompletion": "NONE",
            **self.body,
            "CreationDate": self.created,
            "LastModificationDate": self.created,
        }


@dataclass
class Scheduler:
    deliver: Callable[[str, Any], None]  # (function name, event): an async invoke
    clock: Clock
    timeline: Timeline
    fast: bool = False
    seed: int | None = None
    _schedules: dict[tuple[str, str], Schedule] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def create(self, name: str, body: dict[str, Any], *, replace: bool = False) -> Schedule:
        group = str(body.pop("GroupName", None) or "default")
        for required in ("ScheduleExpression", "Target", "FlexibleTimeWindow"):
            if required not in body:
                raise SchedulerError("ValidationException", 400, f"{required} is required")
        first = self._first_due(body)
        with self._lock:
            old = self._schedules.get((group, name))
            if old is not None and not replace:
                raise SchedulerError("ConflictException", 409, f"Schedule {name} already exists.")
            if old is None and replace:
                raise SchedulerError(
                    "ResourceNotFoundException", 404, f"Schedule {name} does not exist."
                )
            if old is not None and old.timer is not None:
                old.timer.cancel()
            schedule = Schedule(name, group, body, self.clock.now())
            self._schedules[(group, name)] = schedule
            self._arm(schedule, first)
        self.timeline.record(
            "schedule_create",
            function=_function(body),
            queue=_queue(body),
            detail=f"{group}/{name} {body['ScheduleExpression']}",
        )
        return schedule

    def get(self, name: str, group: str | None) -> Schedule:
        with self._lock:
            schedule = self._schedules.get((group or "default", name))
        if schedule is None:
            raise SchedulerError(
                "ResourceNotFoundException", 404, f"Schedule {name} does not exist."
            )
        return schedule

    def delete(self, name: str, group: str | None, *, why: str = "deleted") -> None:
        with self._lock:
            schedule = self._schedules.pop((group or "default", name), None)
        if schedule is None:
            raise SchedulerError(
                "ResourceNotFoundException", 404, f"Schedule {name} does not exist."
            )
        if schedule.timer is not None:
            schedule.timer.cancel()
        self.timeline.record(
            "schedule_delete",
            function=_function(schedule.body),
            queue=_queue(schedule.body),
            detail=f"{schedule.group}/{name} {why}",
        )

    def list(self, group: str | None = None, prefix: str | None = None) -> list[Schedule]:
        with self._lock:
            return sorted(
                (
                    s
                    for s in self._schedules.values()
                    if (group is None or s.group == group) and s.name.startswith(prefix or "")
                ),
                key=lambda s: (s.group, s.name),
            )

    def close(self) -> None:
        with self._lock:
            for schedule in self._schedules.values():
                if schedule.timer is not None:
                    schedule.timer.cancel()

    # -- timing -------------------------------------------------------------------------
    def _first_due(self, body: dict[str, Any]) -> float | None:
        return self._next_due(body, self.clock.now(), first=True)

    def _next_due(self, body: dict[str, Any], after: float, *, first: bool = False) -> float | None:
        """When the scheduler's own expression falls next (before the within-the-minute offset)."""
        expression = str(body["ScheduleExpression"])
        zone = str(body.get("ScheduleExpressionTimezone") or "UTC")
        if expression.startswith("at(") and expression.endswith(")"):
            if not first:
                return None
            try:
                local = datetime.fromisoformat(expression[3:-1])
            except ValueError:
                raise SchedulerError(
                    "ValidationException", 400, f"Invalid Schedule Expression {expression}."
                ) from None
            return local.replace(tzinfo=ZoneInfo(zone)).timestamp()
        try:
            tick = next_tick(expression, zone, datetime.fromtimestamp(after, UTC))
        except ValueError as exc:
            raise SchedulerError(
                "ValidationException", 400, f"Invalid Schedule Expression {expression}: {exc}"
            ) from None
        return tick.timestamp() if tick else None

    def _arm(self, schedule: Schedule, due: float | None) -> None:
        """Under the lock: one timer for the schedule's next firing, within the minute after
        `due` (or at the whole second when fast). A time already past fires at once."""
        schedule.due = due
        if due is None:
            return
        now = self.clock.now()
        if self.fast:
            at = float(math.ceil(max(due, now)))
        else:
            at = max(due, now) + self._random.uniform(0, 59)
        schedule.timer = self.clock.call_later(at - now, lambda: self._fire(schedule, due))

    def _fire(self, schedule: Schedule, due: float) -> None:
        body = schedule.body
        with self._lock:
            if self._schedules.get((schedule.group, schedule.name)) is not schedule:
                return  # deleted or replaced meanwhile
            schedule.fired += 1
            follow = self._next_due(body, due)
            self._arm(schedule, follow)
            done = follow is None and body.get("ActionAfterCompletion") == "DELETE"
            if done:  # gone before its event is out: a waiter never sees it fired and kept
                del self._schedules[(schedule.group, schedule.name)]
        text = json.dumps(json.loads(body["Target"].get("Input") or "{}"))
        event = json.loads(text.replace("<aws.scheduler.scheduled-time>", _iso(due)))
        self.timeline.record(
            "schedule_fire",
            function=_function(body),
            queue=_queue(body),
            detail=f"{schedule.group}/{schedule.name} due {_iso(due)}",
        )
        if done:
            self.timeline.record(
                "schedule_delete",
                function=_function(body),
                queue=_queue(body),
                detail=f"{schedule.group}/{schedule.name} after completion",
            )
        self.deliver(_function(body) or "", event)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _function(body: dict[str, Any]) -> str | None:
    """The target's function name, from its ARN (arn:aws:lambda:...:function:NAME[:qualifier])."""
    arn = str(body.get("Target", {}).get("Arn", ""))
    parts = arn.split(":")
    if "function" in parts:
        return parts[parts.index("function") + 1]
    return arn or None


def _queue(body: dict[str, Any]) -> str | None:
    try:
        event = json.loads(body.get("Target", {}).get("Input") or "{}")
    except ValueError:
        return None
    return event.get("queue") if isinstance(event, dict) else None
