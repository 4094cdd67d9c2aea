"""Kickers: how "there is work in queue Q" reaches a worker, and how a wake-up is booked.

Why a kick carries only the queue and a reason: the database is the source of
truth, so a kick is a hint ("go and look"), tiny, safe to lose or duplicate. A
lost kick delays a job until the next wake-up or the reaper; a duplicate kick
finds nothing and exits.

Wake-ups replace polling for jobs that are not ready yet (delays, retries):
one EventBridge Scheduler one-time schedule per queue per minute, idempotent by
name, deleted by the scheduler after it fires.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

log = logging.getLogger("pgkick.kick")

REASONS = frozenset({"enqueue", "wake", "rekick", "fanout", "reaper", "manual"})


class Kicker(Protocol):
    def kick(self, queue: str, reason: str) -> None:
        """Ask for a worker on `queue` now. May raise; callers never let that lose a job."""

    def wake_at(self, queue: str, when: datetime) -> None:
        """Ask for a worker on `queue` at `when` (a job's future run_at)."""


class NoKicker:
    """The app drives its workers itself (or the reaper does): kicks go nowhere."""

    def kick(self, queue: str, reason: str) -> None:
        return None

    def wake_at(self, queue: str, when: datetime) -> None:
        return None


def kick_event(queue: str, reason: str) -> dict[str, str]:
    """The whole of a kick's payload: never the job itself."""
    return {"queue": queue, "reason": reason}


def wake_minute(when: datetime) -> datetime:
    """`when` rounded up to the whole minute, in UTC: a wake never fires before run_at."""
    utc = when.astimezone(UTC)
    floor = utc.replace(second=0, microsecond=0)
    return floor if floor == utc else floor + timedelta(minutes=1)


def schedule_name(queue: str, minute: datetime) -> str:
    """Unique per queue and minute, within the scheduler's 64 characters of [A-Za-z0-9_.-]."""
    slug = re.sub(r"[^A-Za-z0-9_-]", "", queue)[:24]
    digest = hashlib.sha256(queue.encode()).hexdigest()[:8]
    return f"pgkick-{slug}-{digest}-{minute:%Y%m%dT%H%M}"


class LambdaKicker:
    """Asynchronous Lambda invokes for kicks; EventBridge Scheduler for wake-ups."""

    def __init__(
        self,
        function: str,
        *,
        function_arn: str | None = None,
        scheduler_role_arn: str | None = None,
        schedule_group: str = "default",
        lambda_client: Any = None,
        scheduler_client: Any = None,
    ) -> None:
        self.function = function
        self.function_arn = function_arn
        self.scheduler_role_arn = scheduler_role_arn
        self.schedule_group = schedule_group
        self._lambda = lambda_client
        self._scheduler = scheduler_client
        self._booked: dict[str, datetime] = {}  # schedule name -> its minute, still to come
        self._lock = threading.Lock()

    def kick(self, queue: str, reason: str) -> None:
        response = self._lambda_client().invoke(
            FunctionName=self.function,
            InvocationType="Event",
            Payload=json.dumps(kick_event(queue, reason)).encode(),
        )
        status = response.get("StatusCode")
        if status != 202:
            raise RuntimeError(f"Lambda invoke of {self.function} answered {status}, not 202")

    def wake_at(self, queue: str, when: datetime) -> None:
        if not (self.function_arn and self.scheduler_role_arn):
            log.warning(
                "no wake-up booked for queue %s at %s: PGKICK_WORKER_ARN and "
                "PGKICK_SCHEDULER_ROLE_ARN are needed; the reaper will run it",
                queue,
                when.isoformat(),
            )
            return
        minute = wake_minute(when)
        name = schedule_name(queue, minute)
        with self._lock:
            if name in self._booked:
                return
        try:
            self._scheduler_client().create_schedule(
                Name=name,
                GroupName=self.schedule_group,
                ScheduleExpression=f"at({minute:%Y-%m-%dT%H:%M:%S})",
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                Target={
                    "Arn": self.function_arn,
                    "RoleArn": self.scheduler_role_arn,
                    "Input": json.dumps(kick_event(queue, "wake")),
                },
            )
        except Exception as exc:
            if _error_code(exc) != "ConflictException":  # booked already: that is the point
                raise
        with self._lock:
            self._booked[name] = minute
            now = datetime.now(UTC)  # a long-lived app forgets the wake-ups that have fired
            self._booked = {n: m for n, m in self._booked.items() if m >= now}

    def _lambda_client(self) -> Any:
        if self._lambda is None:
            self._lambda = _boto3().client("lambda")
        return self._lambda

    def _scheduler_client(self) -> Any:
        if self._scheduler is None:
            self._scheduler = _boto3().client("scheduler")
        return self._scheduler


def _boto3() -> Any:
    """boto3 on first use: importing it costs ~0.3 s of CPU, paid by every cold worker that
    imported pgkick, though a worker that never kicks (or kicks locally) never needs it."""
    import boto3

    return boto3


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None
