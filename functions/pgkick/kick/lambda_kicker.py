"""The Lambda kicker: asynchronous invokes for kicks, EventBridge Scheduler for wake-ups.

Why apart from pgkick.kick.kickers: this is the one kicker that talks to AWS (inside a
Lambda runtime with pgkick.awsapi's signed calls, elsewhere with boto3, imported on first
use); the protocol, the events and the schedule names it uses are shared with every other
kicker and the local stack.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Self

from pgkick import config
from pgkick.awsapi.boto import aws_client
from pgkick.errors import KickRefused
from pgkick.kick.bookings import WakeBooker
from pgkick.kick.kickers import (
    book_wake,
    booking_minute,
    first_minute,
    kick_event,
    one_time_schedule,
    schedule_name,
)
from pgkick.kick.throttle import Backoff, error_code, retried

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
        dead_letter_arn: str | None = None,
        lambda_client: Any = None,
        scheduler_client: Any = None,
        timeout: float = 2.0,
        backoff: Backoff | None = None,
        background_backoff: Backoff | None = None,
    ) -> None:
        """timeout: seconds to connect and to read, per attempt (2 attempts at most).
        backoff: how a throttled call made for a caller (a rescue, its cancel) is retried:
        within 3 s. background_backoff: the wake-ups' own thread, off any commit path: 30 s."""
        self.function = function
        self.timeout = timeout
        self.function_arn = function_arn
        self.scheduler_role_arn = scheduler_role_arn
        self.schedule_group = schedule_group
        self.dead_letter_arn = dead_letter_arn
        self._lambda = lambda_client
        self._scheduler = scheduler_client
        self.backoff = backoff or Backoff(budget=3.0)
        self.background_backoff = background_backoff or Backoff(budget=30.0)
        self.wakes = WakeBooker(self._book_wake)

    @classmethod
    def from_settings(cls, settings: config.Settings) -> Self:
        """The worker's (or the CLI's) kicker, as the deployed function's variables set it."""
        assert settings.worker_function is not None, "PGKICK_WORKER_FUNCTION names the worker"
        return cls(
            settings.worker_function,
            function_arn=settings.worker_arn,
            scheduler_role_arn=settings.scheduler_role_arn,
            schedule_group=settings.schedule_group,
            dead_letter_arn=settings.schedule_dlq_arn,
            timeout=settings.aws_timeout,
        )

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
        """Noted at once, booked by a background thread (pgkick.kick.bookings): one call per
        queue and minute, whatever the number of jobs, and none on the caller's time."""
        if not self._can_schedule():
            log.warning(
                "no wake-up booked for queue %s at %s: PGKICK_WORKER_ARN and "
                "PGKICK_SCHEDULER_ROLE_ARN are needed; the reaper will run it",
                queue,
                when.isoformat(),
            )
            return
        minute = first_minute(when)  # a margin ahead: a refusal as past is booked again
        self.wakes.book(schedule_name(queue, minute), minute, queue)

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the wake-ups noted to be booked (a handler, before it
        answers: Lambda freezes the environment, and its background thread with it)."""
        return self.wakes.flush(timeout)

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        if self._can_schedule():
            event = kick_event(queue, "rescue")
            self._schedule(name, booking_minute(when), event, self.backoff)

    def cancel_rescue(self, name: str) -> None:
        if not self._can_schedule():
            return
        try:
            retried(
                self.backoff,
                self._scheduler_client().delete_schedule,
                Name=name,
                GroupName=self.schedule_group,
            )
        except Exception as exc:
            if error_code(exc) != "ResourceNotFoundException":  # fired already, or never made
                raise

    def _can_schedule(self) -> bool:
        return bool(self.function_arn and self.scheduler_role_arn)

    def _book_wake(self, name: str, minute: datetime, queue: str) -> None:
        """The booking thread's call (`name` is schedule_name(queue, minute)); a minute
        Scheduler refuses as past is booked a minute further (pgkick.kick.kickers.book_wake)."""
        event = kick_event(queue, "wake")
        book_wake(
            lambda name, at: self._schedule(name, at, event, self.background_backoff),
            queue,
            minute,
            lambda exc: error_code(exc) == "ValidationException",
        )

    def _schedule(
        self, name: str, minute: datetime, event: dict[str, Any], backoff: Backoff
    ) -> None:
        """A one-time schedule invoking the worker with `event`; made already is fine."""
        assert self.function_arn and self.scheduler_role_arn
        params = one_time_schedule(
            name,
            minute,
            event,
            function_arn=self.function_arn,
            role_arn=self.scheduler_role_arn,
            group=self.schedule_group,
            dead_letter_arn=self.dead_letter_arn,
        )
        try:
            retried(backoff, self._scheduler_client().create_schedule, **params)
        except Exception as exc:
            if error_code(exc) != "ConflictException":  # booked already: that is the point
                raise

    def _lambda_client(self) -> Any:
        """Inside a Lambda runtime, a worker's kicks without boto3 (its first kick used to
        wait 0.4 s for boto3: pgkick.awsapi.lambda_invoke); boto3 anywhere else."""
        if self._lambda is None:
            from pgkick.awsapi.lambda_invoke import InvokeClient

            light = InvokeClient.available(self.timeout)
            self._lambda = light or aws_client("lambda", self.timeout)
        return self._lambda

    def _scheduler_client(self) -> Any:
        """Inside a Lambda runtime, the worker's own Scheduler calls without boto3 (its first
        rescue booking used to wait 0.4 s for boto3: pgkick.awsapi.scheduler); boto3
        anywhere else."""
        if self._scheduler is None:
            from pgkick.awsapi.scheduler import SchedulerClient

            light = SchedulerClient.available(self.timeout)
            self._scheduler = light or aws_client("scheduler", self.timeout)
        return self._scheduler
