"""EventBridge Scheduler's schedules, stood in: what one is, when it falls due, its errors.

Why apart from the scheduler (pgkick_dev.devserver.scheduler), which keeps, arms, fires
and delivers them: the rules here need no timer and no lock. A schedule's expression
says when it falls due, in its ScheduleExpressionTimezone: `at(...)` once, `rate(...)`
and `cron(...)` at each tick (pgkick_dev.local.cron). As AWS does, a one-time at()
already past is refused with a ValidationException. AWS's API reference does not say so
in words; it is observed: "AWS rejects a fire time in the past at create"
(github.com/DefangLabs/pulumi-defang/pull/425, a one-time schedule guarded for it), and
issue #30 reports the same; pgkick tries a wake-up a few seconds ahead and, refused,
books it a minute ahead (pgkick.kick.kickers.first_minute, booking_minute). An expression
that does not parse is refused the same way: an at() is `at(yyyy-mm-ddThh:mm:ss)` exactly
("Schedule types on EventBridge Scheduler"; an offset, a date alone or a space is
refused, not read as ISO's other forms), in a zone that exists. Errors carry the
exception name boto3 raises and the HTTP status, so the Scheduler API
(pgkick_dev.devserver.scheduler_api) answers as AWS does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pgkick_dev.devserver.clock import Cancellable
from pgkick_dev.local.cron import next_tick

ACCOUNT_ARN = "arn:aws:scheduler:us-east-1:123456789012"
AT = re.compile(r"at\([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\)")


@dataclass
class SchedulerFaults:
    """Faults AWS documents, injected on request (0: none)."""

    api_throttle_rate: float = 0.0  # share of CreateSchedule calls throttled (account TPS)
    delivery_failure_rate: float = 0.0  # share of deliveries the target refuses (throttled)


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
    modified: float | None = None  # the last UpdateSchedule's time (CreationDate is kept)
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
            "LastModificationDate": self.created if self.modified is None else self.modified,
        }


def first_due(body: dict[str, Any], now: Callable[[], float]) -> float | None:
    """When a new schedule's expression first falls (before the within-the-minute offset);
    a one-time at() already past, or an expression that does not parse, is refused."""
    expression, zone = _expression(body)
    if _one_time(expression):
        due = _at(expression, zone)
        if due < now():
            raise SchedulerError(
                "ValidationException",
                400,
                f"The ScheduleExpression {expression} is in the past: a one-time schedule "
                "must be set to a time in the future.",
            )
        return due
    return _tick(expression, zone, now())


def next_due(body: dict[str, Any], after: float) -> float | None:
    """When the expression falls next after a firing at `after`; None for a one-time one."""
    expression, zone = _expression(body)
    if _one_time(expression):
        return None
    return _tick(expression, zone, after)


def _expression(body: dict[str, Any]) -> tuple[str, str]:
    return str(body["ScheduleExpression"]), str(body.get("ScheduleExpressionTimezone") or "UTC")


def _at(expression: str, zone: str) -> float:
    """at(yyyy-mm-ddThh:mm:ss) in `zone`, as AWS reads it: that form exactly (no offset, no
    fraction, no date alone: ISO's other forms are refused), and a zone that exists."""
    try:
        local = datetime.strptime(expression, "at(%Y-%m-%dT%H:%M:%S)")
    except ValueError:
        local = None
    if local is None or not AT.fullmatch(expression):  # strptime takes '7' for '07'
        raise SchedulerError(
            "ValidationException",
            400,
            f"Invalid Schedule Expression {expression}: use at(yyyy-mm-ddThh:mm:ss).",
        )
    try:
        return local.replace(tzinfo=ZoneInfo(zone)).timestamp()
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: a path, not a name
        raise SchedulerError(
            "ValidationException", 400, f"Invalid ScheduleExpressionTimezone {zone}."
        ) from None


def _one_time(expression: str) -> bool:
    return expression.startswith("at(") and expression.endswith(")")


def _tick(expression: str, zone: str, after: float) -> float | None:
    try:
        tick = next_tick(expression, zone, datetime.fromtimestamp(after, UTC))
    except ValueError as exc:
        raise SchedulerError(
            "ValidationException", 400, f"Invalid Schedule Expression {expression}: {exc}"
        ) from None
    return tick.timestamp() if tick else None


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def target_function(body: dict[str, Any]) -> str | None:
    """The target's function name, from its ARN (arn:aws:lambda:...:function:NAME[:qualifier])."""
    arn = str(body.get("Target", {}).get("Arn", ""))
    parts = arn.split(":")
    if "function" in parts:
        return parts[parts.index("function") + 1]
    return arn or None


def target_queue(body: dict[str, Any]) -> str | None:
    try:
        event = json.loads(body.get("Target", {}).get("Input") or "{}")
    except ValueError:
        return None
    return event.get("queue") if isinstance(event, dict) else None
