"""Kickers: how "there is work in queue Q" reaches a worker, and how a wake-up is booked.

Why a kick carries only the queue and a reason: the database is the source of
truth, so a kick is a hint ("go and look"), tiny, safe to lose or duplicate. A
lost kick delays a job until the next wake-up or the reaper; a duplicate kick
finds nothing and exits.

Wake-ups replace polling for jobs that are not ready yet (delays, retries):
one EventBridge Scheduler one-time schedule per queue per minute, idempotent by
name, deleted by the scheduler after it fires.
"""

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

from pgkick.errors import BadEvent, InvalidArgument
from pgkick.validation import check_name

log = logging.getLogger("pgkick.kick")

# heal: a worker leaving, or the reaper, found the queue ready and unwatched (pgkick.worker.healing)
# dependants: a worker's complete released jobs waiting on it (pgkick.worker.dependants)
REASONS = frozenset(
    {"enqueue", "wake", "rescue", "rekick", "fanout", "reaper", "manual", "heal", "dependants"}
)


# A job's run_at is the server's clock (now() at its insert); whether it is due is asked of
# this machine's, read after the commit. A clock a few ms behind the server's took a job due
# at once for a later one: no kick, a wake-up at Scheduler's next minute instead. Within
# this allowance a job is kicked now (its wake-up is still booked: `run_at > now`). Why
# 100 ms, not more: clocks kept by NTP (Amazon Time Sync) differ by well under it, and a
# worker reaches its claim later than that anyway; a job delayed further is not kicked (a
# worker finding nothing due leaves, and the kick is an invocation for nothing).
SERVER_CLOCK_ALLOWANCE = timedelta(milliseconds=100)


def due_by(run_at: datetime, now: datetime) -> bool:
    """Whether a job the server dated `run_at` is due (or about to be) by this machine's
    `now`: kick its queue now (SERVER_CLOCK_ALLOWANCE says why the margin)."""
    return run_at <= now + SERVER_CLOCK_ALLOWANCE


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
    """The whole of a kick's payload: never the job itself. Hop 0 is left out.

    A reason the worker would refuse (`parse_kick_event`) raises here, in the caller's
    hands and its tests: sent, it would cost an invocation that runs nothing (`pgkick
    resume` kicked with "resume", which no worker accepted)."""
    if reason not in REASONS:
        raise InvalidArgument(
            f"kick reason {reason!r} is not one a worker accepts: {sorted(REASONS)}"
        )
    event: dict[str, Any] = {"queue": queue, "reason": reason}
    if hop:
        event["hop"] = hop
    return event


class KickEvent(NamedTuple):
    """What a kick asks of a worker, once parse_kick_event has checked it."""

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


# A one-time schedule's at() already past is refused by EventBridge Scheduler (a
# ValidationException; pgkick_dev.devserver.schedules cites the source), and the call
# reaches AWS some time after we computed it, from a clock that may be a little off. So a
# booking that must not fail (a rescue) is made at least a minute and a margin ahead: its
# minute is then still to come when AWS reads it, whatever the round trip, and the
# scheduler fires within that minute. A wake-up is tried a margin ahead first (first_minute).
WAKE_AHEAD = timedelta(minutes=1)
WAKE_MARGIN = timedelta(seconds=5)


def booking_minute(when: datetime, now: datetime | None = None) -> datetime:
    """The minute a booking made now must take: `when`'s (rounded up), and never less than
    WAKE_AHEAD + WAKE_MARGIN from `now`, so Scheduler never sees an at() in the past. For a
    rescue, made on the caller's time, and for a wake-up Scheduler refused as past."""
    earliest = (now or datetime.now(UTC)) + WAKE_AHEAD + WAKE_MARGIN
    return wake_minute(max(when, earliest))


def first_minute(when: datetime, now: datetime | None = None) -> datetime:
    """The minute a wake-up is first tried at: `when`'s (rounded up), at least WAKE_MARGIN
    from `now`. Sooner than booking_minute by up to a minute (a failed kick's jobs, a
    hand-over, a retry due in seconds), and safe without its minute ahead because a wake-up
    is booked in the background, where a refusal as past is booked again at booking_minute
    (pgkick.kick.lambda_kicker): a clock a little off costs one more call, not the wake-up."""
    return wake_minute(max(when, (now or datetime.now(UTC)) + WAKE_MARGIN))


def book_wake(
    create: Callable[[str, datetime], None],
    queue: str,
    minute: datetime,
    refused_as_past: Callable[[Exception], bool],
) -> datetime:
    """Make a wake-up's schedule with `create(name, minute)` at `minute` (first_minute's);
    if Scheduler refuses it as gone by (a clock a little off, a slow call, a booking thread
    frozen with its Lambda environment), make it again at booking_minute's, a minute and a
    margin ahead, rather than give it up to the next sweep or the reaper. Any other refusal,
    or one for a minute booking_minute would keep, is raised. Returns the minute booked."""
    try:
        create(schedule_name(queue, minute), minute)
        return minute
    except Exception as exc:
        later = booking_minute(minute)  # `minute` itself while it is still far enough
        if not refused_as_past(exc) or later == minute:
            raise
    log.info("wake-up of queue %s for %s booked at %s: that minute went by before its "
             "booking", queue, minute.isoformat(), later.isoformat())  # fmt: skip
    create(schedule_name(queue, later), later)
    return later


def schedule_name(queue: str, minute: datetime) -> str:
    """Unique per queue and minute, within the scheduler's 64 characters of [A-Za-z0-9_.-]."""
    slug = re.sub(r"[^A-Za-z0-9_-]", "", queue)[:24]
    digest = hashlib.sha256(queue.encode()).hexdigest()[:8]
    return f"pgkick-{slug}-{digest}-{minute:%Y%m%dT%H%M}"


# Every one-time schedule pgkick books carries a retry policy: when delivery to the worker
# fails (Lambda throttles the invoke, a permission is missing), Scheduler retries for up to an
# hour (AWS's default would be 185 attempts over 24 h; a wake-up a day late is worth less
# than its dead letter: the worker drains PGKICK_SCHEDULE_DLQ_ARN's queue, so the kick still
# becomes a run), then sends the event, the schedule's Input itself, to the dead-letter queue.
RETRY_POLICY = {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 185}


def one_time_schedule(
    name: str,
    minute: datetime,
    event: Mapping[str, Any],
    *,
    function_arn: str,
    role_arn: str,
    group: str = "default",
    dead_letter_arn: str | None = None,
) -> dict[str, Any]:
    """CreateSchedule's parameters for a wake-up or a rescue at `minute`: one place for the
    Lambda kicker, the local stack's client and the stack itself. The Input is the kick event
    (queue, reason), whole: a dead letter holding it says which queue to drain and why."""
    target: dict[str, Any] = {
        "Arn": function_arn,
        "RoleArn": role_arn,
        "Input": json.dumps(dict(event)),
        "RetryPolicy": dict(RETRY_POLICY),
    }
    if dead_letter_arn:
        target["DeadLetterConfig"] = {"Arn": dead_letter_arn}
    return {
        "Name": name,
        "GroupName": group,
        "ScheduleExpression": f"at({minute:%Y-%m-%dT%H:%M:%S})",
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
        "Target": target,
    }
