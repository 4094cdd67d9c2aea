"""What an operator may type: argparse types that refuse a bad value in one line.

Apart from pgkick.cli.main so the commands read as what they do; each type here bounds
its value (a span of at most a century, a wait of at most an hour...) so that no
command reaches the database with a value it would choke on.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pgkick import config
from pgkick.errors import ConfigError, InvalidArgument
from pgkick.store import flow, groups
from pgkick.store.inspect import parse_id
from pgkick.validation import MAX_ATTEMPTS_LIMIT

SPAN = re.compile(r"^([0-9]+)([smhd])$")  # ASCII digits: \d takes any Unicode digit
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
MAX_SPAN = timedelta(days=36_500)
MAX_WAIT = 3600.0


def schema_name(text: str) -> str:
    """--schema: a name pgkick can own (the same rule as PGKICK_SCHEMA)."""
    try:
        return config.check_schema_name(text, "--schema")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def job_id(text: str) -> int:
    """A job id (`pgkick retry|cancel ID...`): a bigint of 1 or more, checked as `pgkick job`
    checks it (pgkick.store.inspect.parse_id), so none reaches the server out of range."""
    try:
        return parse_id(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def span(text: str) -> timedelta:
    """'30s', '15m', '12h', '7d' -> timedelta, at most MAX_SPAN (a purge's horizon)."""
    match = SPAN.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number and s, m, h or d (7d)")
    if len(match[1]) > 9 or timedelta(**{UNITS[match[2]]: int(match[1])}) > MAX_SPAN:
        raise argparse.ArgumentTypeError(f"{text!r}: at most {MAX_SPAN.days}d")
    return timedelta(**{UNITS[match[2]]: int(match[1])})


RATE = re.compile(r"^([0-9]{1,10})/([0-9]{0,9})([smhd])$")


def rate(text: str) -> tuple[int, timedelta]:
    """--rate N/period: '10/1m', '100/s', '5/30s' -> (jobs, period), checked as the API
    checks it (at least 1 job, a period of 1 s..1 day)."""
    match = RATE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected N/period, N a whole number and the period a number and "
            "s, m, h or d (10/1m, 100/s)"
        )
    count, period = int(match[1]), timedelta(**{UNITS[match[3]]: int(match[2] or 1)})
    try:
        return flow.check_rate(count, period, remove="to remove the queue's rate: --no-rate")
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def whole(text: str) -> int:
    """A whole number as a person types it: ASCII digits (a sign allowed). int() also reads
    full-width and other Unicode digits and `1_000`, so `--batch \uff11\uff10` ran with 10
    (the dashboard refused them already: pgkick.store.inspect.parse_id)."""
    if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def concurrency(text: str) -> int:
    """--concurrency N: a whole number checked as the API checks it (1..2**31 - 1, the
    column's bound; the command capped it at 10**9 and refused what the API sets)."""
    value = whole(text)
    try:
        return groups.check_count(
            "concurrency", value, "to remove the queue's concurrency: --no-concurrency"
        )
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive(text: str, most: int = 10**9) -> int:
    """A whole number of at least 1 (and at most `most`)."""
    value = whole(text)
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1 and at most {most}")
    return value


def extra_attempts(text: str) -> int:
    """More attempts for a retry: max_attempts may not pass MAX_ATTEMPTS_LIMIT."""
    return positive(text, MAX_ATTEMPTS_LIMIT - 1)


def number(text: str) -> float:
    """A number as a person types it: ASCII only (float() reads Unicode digits and `1_0`)."""
    if not text.isascii() or "_" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _seconds(text: str) -> float:
    if not text.isascii() or "_" in text:  # float() reads Unicode digits and 1_0 too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None


def wait_seconds(text: str) -> float:
    """Seconds to wait for the job, finite: 0 (don't) up to MAX_WAIT."""
    value = _seconds(text)
    if not 0 <= value <= MAX_WAIT:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text!r}: expected 0..{MAX_WAIT:g} seconds")
    return value


def seconds(above: float, most: float) -> Callable[[str], float]:
    """A type for a finite number of seconds over `above` and at most `most` (a negative
    window, a NaN duration or a zero interval refused, not watched forever)."""

    def parse(text: str) -> float:
        value = _seconds(text)
        if not above < value <= most:  # NaN fails this too
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected over {above:g} and at most {most:g} seconds"
            )
        return value

    return parse


def instant(text: str) -> datetime:
    """--since/--until: an ISO 8601 time with its offset (2026-12-01T09:00+00:00), or a span
    meaning that long ago (7d, 12h)."""
    if SPAN.match(text):
        return datetime.now(UTC) - span(text)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an ISO time with its offset (2026-12-01T09:00+00:00) or a "
            "span ago (7d)"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give its offset (+00:00 for UTC)")
    return value


def json_payload(text: str) -> object:
    """--payload: a JSON value, refused in one line when it is not one (or nests past
    Python's recursion limit), and a number past a float's range named by its text.

    Why the number: json.loads read 1e400 as inf, which the payload's check then refused
    as "NaN and Infinity are not JSON", a value the operator never typed (a review, F5).
    Other numbers keep Python's float rounding (19.999999999999999999 is stored 20.0), as
    every enqueue form's payload does."""
    try:
        return json.loads(text, parse_float=_finite_float)
    except InvalidArgument as exc:  # _finite_float's (a ValueError too: caught first)
        raise InvalidArgument(f"--payload: {exc}") from None
    except (ValueError, RecursionError) as exc:
        reason = exc if isinstance(exc, ValueError) else "nested too deeply"
        raise InvalidArgument(f"--payload is not JSON: {reason}") from None


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise InvalidArgument(f"number {text} is out of range (a float holds up to ~1.8e308)")
    return value
