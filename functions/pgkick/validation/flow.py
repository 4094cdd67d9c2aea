"""Debounce and throttle on enqueue (migration 0015, docs/guide/debounce.md): the periods,
and which options go together, checked before anything is written.

Why here: a debounce without a key, or one that would fight a `run_at`, is a promise the
database cannot keep; it must fail in the caller's hands, with the option named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.validation.schedule import seconds_text

# Debounce and throttle periods: above zero, at most a month. A longer one is almost
# certainly seconds mistaken for milliseconds, and would hold a key (and its payloads) for
# longer than anyone waits on a job.
MAX_FLOW_PERIOD = timedelta(days=30)
_FLOW_FIELDS = ("debounce", "max_delay", "throttle")


def check_period(field: str, value: object) -> timedelta | None:
    """None, or seconds (int, float) or a timedelta within (0, MAX_FLOW_PERIOD]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise InvalidArgumentType(
            f"{field}: must be seconds or a timedelta, got {type(value).__name__}"
        )
    if isinstance(value, timedelta):
        span = value
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"{field}: {value} is not a number of seconds")
    elif not 0 < value <= MAX_FLOW_PERIOD.total_seconds():
        raise InvalidArgument(
            f"{field}: {seconds_text(value)} seconds is outside (0, "
            f"{MAX_FLOW_PERIOD.total_seconds():.0f}] (above zero, at most 30 days)"
        )
    else:
        span = timedelta(seconds=value)
    if not timedelta(0) < span <= MAX_FLOW_PERIOD:
        raise InvalidArgument(f"{field}: {span} is outside (0, 30 days]")
    return span


def check_flow(
    options: Mapping[str, Any], unique_key: str | None
) -> tuple[timedelta | None, timedelta | None, timedelta | None]:
    """(debounce, max_delay, throttle): one of debounce and throttle at most, on a job with
    a unique key (the key is what a burst shares); debounce decides the due time itself."""
    debounce, max_delay, throttle = (check_period(f, options.get(f)) for f in _FLOW_FIELDS)
    if debounce is None and throttle is None and max_delay is None:
        return None, None, None
    if debounce is not None and throttle is not None:
        raise InvalidArgument(
            "debounce and throttle: give one or the other (debounce keeps the last "
            "payload, throttle the first)"
        )
    if max_delay is not None and debounce is None:
        raise InvalidArgument("max_delay: only caps a debounce; pass debounce= too")
    if unique_key is None:
        field = "debounce" if debounce is not None else "throttle"
        raise InvalidArgument(
            f"{field}: needs a unique_key (the key the burst shares, e.g. 'reindex:42')"
        )
    if debounce is not None and (
        options.get("run_at") is not None or options.get("delay") is not None
    ):
        raise InvalidArgument(
            "debounce with run_at or delay: the debounce sets when the job runs; drop one"
        )
    if max_delay is not None and debounce is not None and max_delay < debounce:
        raise InvalidArgument(
            f"max_delay: {max_delay} is shorter than debounce {debounce}; make it at least as long"
        )
    return debounce, max_delay, throttle
