"""The Lambda kicker: asynchronous invokes for kicks, EventBridge Scheduler for wake-ups.

Why apart from pgkick.kick.kickers: this is the one kicker that talks to AWS (boto3,
imported on first use); the protocol, the events and the schedule names it uses are
shared with every other kicker and the local stack.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

from pgkick.errors import KickRefused
from pgkick.kick.kickers import booking_minute, kick_event, schedule_name

log = logging.getLogger("pgkick.kick")


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
        timeout: float = 2.0,
    ) -> None:
        """timeout: seconds to connect and to read, per attempt (2 attempts at most)."""
        self.function = function
        self.timeout = timeout
        self.function_arn = function_arn
        self.scheduler_role_arn = scheduler_role_arn
        self.schedule_group = schedule_group
        self._lambda = lambda_client
        self._scheduler = scheduler_client
        self._booked: dict[str, datetime] = {}  # schedule name -> its minute, still to come
        self._lock = threading.Lock()

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        response = self._lambda_client().invoke(
            FunctionName=self.function,
            InvocationType="Event",
            Payload=json.dumps(kick_event(queue, reason, hop)).encode(),
        )
        status = response.get("StatusCode")
        if status != 202:
            raise KickRefused(f"Lambda invoke of {self.function} answered {status}, not 202")

    def wake_at(self, queue: str, when: datetime) -> None:
        if not (self.function_arn and self.scheduler_role_arn):
            log.warning(
                "no wake-up booked for queue %s at %s: PGKICK_WORKER_ARN and "
                "PGKICK_SCHEDULER_ROLE_ARN are needed; the reaper will run it",
                queue,
                when.isoformat(),
            )
            return
        minute = booking_minute(when)
        name = schedule_name(queue, minute)
        with self._lock:
            if name in self._booked:
                return
        self._schedule(name, minute, kick_event(queue, "wake"))
        with self._lock:
            self._booked[name] = minute
            now = datetime.now(UTC)  # a long-lived app forgets the wake-ups that have fired
            self._booked = {n: m for n, m in self._booked.items() if m >= now}

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        if self.function_arn and self.scheduler_role_arn:
            self._schedule(name, booking_minute(when), kick_event(queue, "rescue"))

    def cancel_rescue(self, name: str) -> None:
        if not (self.function_arn and self.scheduler_role_arn):
            return
        try:
            self._scheduler_client().delete_schedule(Name=name, GroupName=self.schedule_group)
        except Exception as exc:
            if _error_code(exc) != "ResourceNotFoundException":  # fired already, or never made
                raise

    def _schedule(self, name: str, minute: datetime, event: dict[str, Any]) -> None:
        """A one-time schedule invoking the worker with `event`; made already is fine."""
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
                    "Input": json.dumps(event),
                },
            )
        except Exception as exc:
            if _error_code(exc) != "ConflictException":  # booked already: that is the point
                raise

    def _lambda_client(self) -> Any:
        if self._lambda is None:
            self._lambda = aws_client("lambda", self.timeout)
        return self._lambda

    def _scheduler_client(self) -> Any:
        if self._scheduler is None:
            self._scheduler = aws_client("scheduler", self.timeout)
        return self._scheduler


def aws_client(service: str, timeout: float) -> Any:
    """A boto3 client whose calls end within about 2 x 2 x `timeout` seconds.

    Why: boto3's defaults (60 s read timeout, retried) let one kick against an
    endpoint that never answers block its caller for 3 minutes, inside a web
    request or a worker's invocation. A kick is a hint: failing fast, logged and
    counted, loses nothing (the job is committed, a wake-up or the reaper runs it).
    boto3 is imported here, on first use: it costs ~0.3 s of CPU that a worker
    which never kicks through Lambda would pay for nothing.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"total_max_attempts": 2, "mode": "standard"},
    )
    return boto3.client(service, config=config)  # type: ignore[call-overload]


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None
