"""When a job is due: `run_at` or `delay`, checked before anything is written.

Why bounded: PostgreSQL holds timestamps Python cannot read back (after year 9999), and a
due time that commits but cannot be read back would fail every later look at the row.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from pgkick.errors import InvalidArgument, InvalidArgumentType

NO_DELAY = timedelta(0)

# The latest due time pgkick accepts: Python (and so psycopg reading a row back) ends at
# year 9999, and a session in another time zone must still be able to read the row.
LATEST_RUN_AT = datetime(9999, 12, 30, tzinfo=UTC)
EARLIEST_RUN_AT = datetime(1, 1, 2, tzinfo=UTC)


def check_schedule(
    run_at: object, delay: object, now: datetime | None = None
) -> tuple[datetime | None, timedelta]:
    """At most one of run_at (timezone-aware) and delay (seconds or timedelta, >= 0), due
    no later than LATEST_RUN_AT: a later one would commit and then fail to read back."""
    if run_at is None and delay is None:
        return None, NO_DELAY
    if run_at is not None and delay is not None:
        raise InvalidArgument("run_at and delay: give one or the other, not both")
    if run_at is not None:
        return _check_run_at(run_at), NO_DELAY
    if isinstance(delay, bool) or not isinstance(delay, int | float | timedelta):
        raise InvalidArgumentType(
            f"delay: must be seconds or a timedelta, got {type(delay).__name__}"
        )
    now = now or datetime.now(UTC)
    room = LATEST_RUN_AT - now
    if isinstance(delay, timedelta):
        span = delay
    elif isinstance(delay, float) and not math.isfinite(delay):
        raise InvalidArgument(f"delay: {delay} is not a number of seconds")
    elif delay < 0:
        raise InvalidArgument(f"delay: {seconds_text(delay)} seconds is negative")
    elif delay > room.total_seconds():
        raise InvalidArgument(
            f"delay: {seconds_text(delay)} seconds would be due after {LATEST_RUN_AT:%Y-%m-%d}"
        )
    else:
        span = timedelta(seconds=delay)
    if span < timedelta(0):
        raise InvalidArgument(f"delay: {span} is negative")
    if span > room:
        raise InvalidArgument(f"delay: {span} would be due after {LATEST_RUN_AT:%Y-%m-%d}")
    return None, span


def seconds_text(delay: float) -> str:
    """A delay for a message: huge ints are not printed in full (or converted to float)."""
    if isinstance(delay, float) or abs(delay) < 10**20:
        return f"{delay:g}" if isinstance(delay, float) else str(delay)
    return ("-" if delay < 0 else "") + "more than 10**20"


def _check_run_at(run_at: object) -> datetime:
    if not isinstance(run_at, datetime):
        raise InvalidArgumentType(f"run_at: must be a datetime, got {type(run_at).__name__}")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise InvalidArgument(
            f"run_at: {run_at.isoformat()} is naive; pass a timezone-aware datetime "
            "(e.g. datetime.now(UTC) + timedelta(minutes=5))"
        )
    try:
        utc = run_at.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_RUN_AT <= utc <= LATEST_RUN_AT:
        raise InvalidArgument(
            f"run_at: {run_at.isoformat()} is outside {EARLIEST_RUN_AT.date().isoformat()}.."
            f"{LATEST_RUN_AT.date().isoformat()} (UTC), which PostgreSQL and Python both hold"
        )
    return run_at
