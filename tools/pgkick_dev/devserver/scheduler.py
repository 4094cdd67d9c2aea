"""EventBridge Scheduler, stood in: schedules kept by group and name, each fired by one timer.

Why a timer per schedule and not a loop: nothing polls, locally either. Why strict: a
stand-in kinder than AWS lets a test pass where the deploy loses a job. As AWS does:
- schedules fire "with 60 second precision": at(12:00:00) fires between 12:00:00 and
  12:00:59 (Scheduler User Guide, "Schedule types", note on precision), a seeded moment in
  that minute; `fast=True`, the labelled kindness, fires at the whole second;
- FlexibleTimeWindow FLEXIBLE fires at a random moment within MaximumWindowInMinutes after
  that (same guide, "Configuring flexible time windows");
- a schedule whose State is DISABLED is kept and never fired until an update enables it;
- a one-time at() already past is refused with a ValidationException
  (pgkick_dev.devserver.schedules: what a schedule is, when it falls due, the errors), as
  is a call outside the API's constraints (pgkick_dev.devserver.schedule_checks: names,
  bounds, FLEXIBLE's window, from botocore's model of the API);
- CreateSchedule is throttled at 10 TPS per schedule (Scheduler quotas, "Schedule
  invocation throttle limit": a fixed 10 requests per second per schedule) and, on request,
  at a share of calls (`api_throttle_rate`, the account's TPS quota), ThrottlingException;
- a delivery the target refuses is retried under the schedule's RetryPolicy, then sent to
  its DeadLetterConfig queue or dropped (pgkick_dev.devserver.scheduler_delivery);
  `delivery_failure_rate` injects such refusals (Lambda throttling the invoke).
With ActionAfterCompletion DELETE a one-time schedule is deleted once fired; `rate(...)`
and `cron(...)` schedules fire at each tick (pgkick_dev.local.cron). Firing sends the
target's Input to the target function's asynchronous queue, as a new chain (the
scheduler's invocations have no lineage).
"""

from __future__ import annotations

import json
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgkick_dev.devserver.clock import Clock
from pgkick_dev.devserver.schedule_checks import check_body
from pgkick_dev.devserver.scheduler_delivery import DeadLetter, Delivery, DeliveryFailed
from pgkick_dev.devserver.schedules import (
    Schedule,
    SchedulerError,
    SchedulerFaults,
    first_due,
    iso,
    next_due,
    target_function,
    target_queue,
)
from pgkick_dev.devserver.timeline import Timeline

__all__ = ["Schedule", "Scheduler", "SchedulerError", "SchedulerFaults"]

PER_SCHEDULE_TPS = 10  # CreateSchedule/UpdateSchedule calls per second on one schedule


@dataclass
class Scheduler:
    deliver: Callable[[str, Any], None]  # (function name, event): an async invoke
    clock: Clock
    timeline: Timeline
    fast: bool = False
    seed: int | None = None
    faults: SchedulerFaults = field(default_factory=SchedulerFaults)
    on_dead_letter: Callable[[DeadLetter], None] | None = None
    on_settled: Callable[[], None] = lambda: None  # a retried delivery ended (waiters look)
    letters: list[DeadLetter] = field(default_factory=list)  # every dead letter, kept
    dropped: int = 0  # deliveries given up with no dead-letter queue (InvocationDroppedCount)
    retrying: int = 0  # deliveries waiting for their next try (their schedule may be gone)
    # the schedule groups that exist: "default" (every account has it) and the template's
    groups: frozenset[str] = frozenset({"default"})
    _schedules: dict[tuple[str, str], Schedule] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _calls: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._faults = random.Random(self.seed)

    def create(self, name: str, body: dict[str, Any], *, replace: bool = False) -> Schedule:
        given = body.pop("GroupName", None)
        body.pop("Name", None)  # the path's is the name
        check_body("UpdateSchedule" if replace else "CreateSchedule", name, given, body)
        group = self._group(given)
        first = first_due(body, self.clock.now)
        self._throttle(group, name)
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
            now = self.clock.now()  # an update replaces the body, keeps the creation date
            schedule = (
                Schedule(name, group, body, now)
                if old is None
                else Schedule(name, group, body, old.created, modified=now)
            )
            self._schedules[(group, name)] = schedule
            # a DISABLED schedule is kept, never fired, until an update enables it
            self._arm(schedule, None if body.get("State") == "DISABLED" else first)
        self.timeline.record(
            "schedule_create",
            function=target_function(body),
            queue=target_queue(body),
            detail=f"{group}/{name} {body['ScheduleExpression']}",
        )
        return schedule

    def get(self, name: str, group: str | None) -> Schedule:
        group = self._group(group)
        with self._lock:
            schedule = self._schedules.get((group, name))
        if schedule is None:
            raise SchedulerError(
                "ResourceNotFoundException", 404, f"Schedule {name} does not exist."
            )
        return schedule

    def delete(self, name: str, group: str | None, *, why: str = "deleted") -> None:
        group = self._group(group)
        with self._lock:
            schedule = self._schedules.pop((group, name), None)
        if schedule is None:
            raise SchedulerError(
                "ResourceNotFoundException", 404, f"Schedule {name} does not exist."
            )
        if schedule.timer is not None:
            schedule.timer.cancel()
        self.timeline.record(
            "schedule_delete",
            function=target_function(schedule.body),
            queue=target_queue(schedule.body),
            detail=f"{schedule.group}/{name} {why}",
        )

    def _group(self, given: str | None) -> str:
        """The group a call names (none: "default"); ResourceNotFoundException, as AWS
        answers, for one that does not exist: a stand-in that took any name would let a
        wrong PGKICK_SCHEDULE_GROUP pass locally and fail every booking deployed."""
        group = str(given or "default")
        if group not in self.groups:
            raise SchedulerError(
                "ResourceNotFoundException", 404, f"Schedule group {group} does not exist."
            )
        return group

    def list(
        self, group: str | None = None, prefix: str | None = None, state: str | None = None
    ) -> list[Schedule]:
        """ListSchedules' filters: its group, a name prefix, a State (ENABLED, DISABLED)."""
        if group is not None:
            self._group(group)
        with self._lock:
            return sorted(
                (
                    s
                    for s in self._schedules.values()
                    if (group is None or s.group == group)
                    and s.name.startswith(prefix or "")
                    and (state is None or s.body.get("State", "ENABLED") == state)
                ),
                key=lambda s: (s.group, s.name),
            )

    def close(self) -> None:
        with self._lock:
            for schedule in self._schedules.values():
                if schedule.timer is not None:
                    schedule.timer.cancel()

    # -- timing -------------------------------------------------------------------------
    def _arm(self, schedule: Schedule, due: float | None) -> None:
        """Under the lock: one timer for the schedule's next firing, at a moment within the
        minute of `due` (60 s precision), plus, with a flexible window, a moment within it;
        at the whole second when fast."""
        schedule.due = due
        if due is None:
            return
        now = self.clock.now()
        if self.fast:
            at = float(math.ceil(max(due, now)))
        else:
            window = schedule.body.get("FlexibleTimeWindow") or {}
            spread = 60.0
            if window.get("Mode") == "FLEXIBLE":
                spread += 60.0 * float(window.get("MaximumWindowInMinutes") or 0)
            at = max(now, due - due % 60 + self._random.uniform(0, spread))
        schedule.timer = self.clock.call_later(at - now, lambda: self._fire(schedule, due))

    def _throttle(self, group: str, name: str) -> None:
        """ThrottlingException past 10 calls a second on one schedule, or as injected."""
        now = self.clock.now()
        with self._lock:
            recent = [t for t in self._calls.get((group, name), []) if t > now - 1.0]
            recent.append(now)
            self._calls[(group, name)] = recent
            if len(self._calls) > 10_000:  # forget the schedules not called in the last second
                self._calls = {k: v for k, v in self._calls.items() if v[-1] > now - 1.0}
            injected = self._faults.random() < self.faults.api_throttle_rate
        if len(recent) > PER_SCHEDULE_TPS or injected:
            raise SchedulerError("ThrottlingException", 429, "Rate exceeded")

    def _fire(self, schedule: Schedule, due: float) -> None:
        body = schedule.body
        with self._lock:
            if self._schedules.get((schedule.group, schedule.name)) is not schedule:
                return  # deleted or replaced meanwhile
            schedule.fired += 1
            follow = next_due(body, due)
            self._arm(schedule, follow)
            done = follow is None and body.get("ActionAfterCompletion") == "DELETE"
            if done:  # gone before its event is out: a waiter never sees it fired and kept
                del self._schedules[(schedule.group, schedule.name)]
        text = json.dumps(json.loads(body["Target"].get("Input") or "{}"))
        event = json.loads(text.replace("<aws.scheduler.scheduled-time>", iso(due)))
        self.timeline.record(
            "schedule_fire",
            function=target_function(body),
            queue=target_queue(body),
            detail=f"{schedule.group}/{schedule.name} due {iso(due)}",
        )
        if done:
            self.timeline.record(
                "schedule_delete",
                function=target_function(body),
                queue=target_queue(body),
                detail=f"{schedule.group}/{schedule.name} after completion",
            )
        self._attempt(Delivery(f"{schedule.group}/{schedule.name}", body["Target"], event, due))

    def _retry(self, delivery: Delivery) -> None:
        with self._lock:
            self.retrying -= 1
        self._attempt(delivery)
        self.on_settled()

    def _attempt(self, delivery: Delivery) -> None:
        """Deliver once; on a refusal, retry later under the RetryPolicy, then dead-letter."""
        function = target_function({"Target": delivery.target}) or ""
        try:
            if self._faults.random() < self.faults.delivery_failure_rate:
                raise DeliveryFailed("TooManyRequestsException", "Rate Exceeded. (injected)")
            # the whole ARN: a qualifier the function lacks is refused, as Lambda refuses it
            self.deliver(str(delivery.target.get("Arn") or function), delivery.event)
            return
        except DeliveryFailed as failure:
            now = self.clock.now()
            delay = delivery.next_delay(self._random)
            condition = delivery.exhausted(now, delay)
            if condition is None:
                delivery.retries += 1
                self.timeline.record(
                    "schedule_retry",
                    function=function,
                    queue=target_queue({"Target": delivery.target}),
                    detail=f"{delivery.schedule} {failure.code}, retry {delivery.retries} in "
                    f"{delay:.0f} s",
                )
                with self._lock:
                    self.retrying += 1
                self.clock.call_later(delay, lambda: self._retry(delivery))
                return
            letter = delivery.dead_letter(failure, condition)
        self.timeline.record(
            "schedule_dead_letter" if letter else "schedule_drop",
            function=function,
            queue=target_queue({"Target": delivery.target}),
            detail=f"{delivery.schedule} after {delivery.retries} retries ({condition})",
        )
        if letter is None:
            with self._lock:
                self.dropped += 1
            return
        with self._lock:
            self.letters.append(letter)
        if self.on_dead_letter is not None:
            self.on_dead_letter(letter)
