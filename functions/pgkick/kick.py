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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pgkick.errors import BadEvent
from pgkick.validation import check_name

log = logging.getLogger("pgkick.kick")

REASONS = frozenset({"enqueue", "wake", "rescue", "rekick", "fanout", "reaper", "manual"})


class Kicker(Protocol):
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        """Ask for a worker on `queue` now. May raise; callers never let that lose a job.

        hop: the invocations of this worker chain before the one asked for (0 from
        an app, the reaper or a wake-up; a worker's own kicks carry its hop + 1)."""

    def wake_at(self, queue: str, when: datetime) -> None:
        """Ask for a worker on `queue` at `when` (a job's future run_at)."""

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        """A worker's dead-man's switch: a `rescue` kick on `queue` at `when` (its leases'
        expiry), under a name of its own, unless `cancel_rescue(name)` comes first."""

    def cancel_rescue(self, name: str) -> None:
        """The worker finished cleanly: its rescue is not needed."""


class NoKicker:
    """The app drives its workers itself (or the reaper does): kicks go nowhere."""

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        return None

    def wake_at(self, queue: str, when: datetime) -> None:
        return None

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        return None

    def cancel_rescue(self, name: str) -> None:
        return None


def kick_event(queue: str, reason: str, hop: int = 0) -> dict[str, Any]:
    """The whole of a kick's payload: never the job itself. Hop 0 is left out."""
    event: dict[str, Any] = {"queue": queue, "reason": reason}
    if hop:
        event["hop"] = hop
    return event


@dataclass(frozen=True, slots=True)
class KickEvent:
    queue: str
    reason: str
    hop: int


MAX_HOP = 1_000_000  # far beyond any chain; a bigger number is a malformed event
SHOWN = 100  # characters of a rejected value quoted back (the event may be huge)


def parse_kick_event(event: object) -> KickEvent:
    """The queue, reason and hop a kick asks for; a clear BadEvent for anything else."""
    if not isinstance(event, Mapping):
        raise BadEvent(f"kick event must be a JSON object, got {type(event).__name__}")
    unknown = sorted(str(key)[:SHOWN] for key in set(event) - {"queue", "reason", "hop"})
    if unknown:
        raise BadEvent(f"kick event has unknown fields {unknown}; expected queue, reason, hop")
    if "queue" not in event:
        raise BadEvent("kick event lacks 'queue'")
    reason = event.get("reason", "manual")
    if not isinstance(reason, str) or reason not in REASONS:
        raise BadEvent(f"kick event reason {_shown(reason)} is not one of {sorted(REASONS)}")
    hop = event.get("hop", 0)
    if type(hop) is not int or not 0 <= hop <= MAX_HOP:
        raise BadEvent(f"kick event hop {_shown(hop)} is not a whole number 0..{MAX_HOP}")
    try:
        queue = check_name("queue", event["queue"])
    except (TypeError, ValueError) as exc:
        raise BadEvent(f"kick event {str(exc)[:SHOWN]}") from None
    return KickEvent(queue=queue, reason=reason, hop=hop)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text)} characters)"


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
        self._schedule(name, minute, kick_event(queue, "wake"))
        with self._lock:
            self._booked[name] = minute
            now = datetime.now(UTC)  # a long-lived app forgets the wake-ups that have fired
            self._booked = {n: m for n, m in self._booked.items() if m >= now}

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        if self.function_arn and self.scheduler_role_arn:
            self._schedule(name, wake_minute(when), kick_event(queue, "rescue"))

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
