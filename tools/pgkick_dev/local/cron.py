"""When a periodic declaration's ticks fall: EventBridge Scheduler's expressions, evaluated locally.

Why: the local kicker stands in for the scheduler (pgkick_dev.local.ticks), so it must
fire at the times the scheduler would, from the same `cron(...)`/`rate(...)` and time
zone that pgkick.tasks.expressions validated (the one check declare, `pgkick schedules
sync` and this module share). The scheduler's documented rules:

- cron's six fields (minutes hours day-of-month month day-of-week year) are read in
  the schedule's time zone; day-of-week 1-7 is SUN-SAT; `L`, `W`, `#` as in Quartz.
- Daylight saving time: a local time that does not exist (the spring gap) is
  skipped, not moved; a local time that happens twice (the autumn overlap) fires
  once, at its first occurrence.
- rate(N unit) counts fixed durations (a day is 24 hours, whatever the clock says).
  The scheduler starts a rate schedule when it is created; here the periods are
  counted from the Unix epoch instead, so every local process that fires the same
  declaration names the same ticks (and the tick key makes them one job).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from pgkick.tasks.expressions import check_expression, check_timezone

_RATE = re.compile(r"rate\(([0-9]+) (minute|hour|day)s?\)")  # whole: see pgkick.tasks.expressions
_UNIT = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS = {n: i for i, n in enumerate(calendar.month_abbr) if n}  # Jan -> 1
_DAYS = {n.upper(): i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], 1)}
_LAST_YEAR = 2199  # the scheduler's year field ends here

DayTest = Callable[[date], bool]


def next_tick(expression: str, timezone: str, after: datetime) -> datetime | None:
    """The first tick strictly after `after` (aware), in UTC; None when there is none left."""
    check_expression(expression)  # the one check declare and schedules sync make
    check_timezone(timezone)
    if after.tzinfo is None:
        raise ValueError(f"after: {after!r} has no time zone")
    rate = _RATE.fullmatch(expression)
    if rate:
        period = int(rate.group(1)) * _UNIT[rate.group(2)]
        return datetime.fromtimestamp((int(after.timestamp()) // period + 1) * period, UTC)
    return _next_cron(expression[5:-1].split(), ZoneInfo(timezone), after.astimezone(UTC))


def _next_cron(fields: list[str], zone: ZoneInfo, after: datetime) -> datetime | None:
    minutes, hours = _values(fields[0], 0, 59), _values(fields[1], 0, 23)
    months, years = _values(fields[3], 1, 12, _MONTHS), _values(fields[5], 1970, _LAST_YEAR)
    day_ok = _day_of_month(fields[2]) if fields[4] == "?" else _day_of_week(fields[4])
    start = after.astimezone(zone).date()
    for year in (y for y in years if y >= start.year):
        for month in (m for m in months if (year, m) >= (start.year, start.month)):
            for day in range(1, calendar.monthrange(year, month)[1] + 1):
                if date(year, month, day) < start or not day_ok(date(year, month, day)):
                    continue
                for hour in hours:
                    for minute in minutes:
                        wall = datetime(year, month, day, hour, minute)
                        at = wall.replace(tzinfo=zone)  # fold 0: an overlap's first occurrence
                        utc = at.astimezone(UTC)
                        if utc.astimezone(zone).replace(tzinfo=None) != wall:
                            continue  # in the spring gap: this local time never happens
                        if utc > after:
                            return utc
    return None


def _number(text: str, names: dict[str, int] | None) -> int:
    if names and text.upper()[:3] in names and not text.isdigit():
        return names[text.upper()[:3]]
    if not text.isdigit():
        raise ValueError(f"cron: {text!r} is not a number or a name")
    return int(text)


def _values(field: str, low: int, high: int, names: dict[str, int] | None = None) -> list[int]:
    """The sorted values a plain field (`*`, `?`, `a`, `a-b`, `x/step`, lists) allows."""
    names = {k.upper(): v for k, v in (names or {}).items()}
    chosen: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base in ("*", "?"):
            first, last = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            first, last = _number(a, names), _number(b, names)
        else:
            first = _number(base, names)
            last = high if step_text else first
        if not (low <= first <= high and low <= last <= high) or step < 1:
            raise ValueError(f"cron: {part!r} is outside {low}-{high}")
        span = (last - first) % (high - low + 1)  # a range may wrap (FRI-MON, NOV-FEB)
        chosen.update(low + (first - low + k) % (high - low + 1) for k in range(0, span + 1, step))
    return sorted(chosen)


def _weekday(day: date) -> int:
    """The scheduler's day of the week: 1 = Sunday ... 7 = Saturday."""
    return (day.weekday() + 1) % 7 + 1


def _last(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


def _last_weekday(day: date) -> date:
    """`LW`: the month's last Monday-to-Friday."""
    last = day.replace(day=_last(day))
    return last - timedelta(days=max(0, last.weekday() - 4))


def _nearest_weekday(day: date, target: int) -> bool:
    """`nW`: the weekday nearest the target day, never leaving its month."""
    target = min(target, _last(day))
    want = day.replace(day=target)
    if want.weekday() == 5:  # Saturday: the Friday before, or Monday if that leaves the month
        want = want - timedelta(days=1) if target > 1 else want + timedelta(days=2)
    elif want.weekday() == 6:  # Sunday: the Monday after, or Friday if that leaves the month
        want = want + timedelta(days=1) if target < _last(day) else want - timedelta(days=2)
    return day == want


def _on(test: Callable[[date, int, int], bool], a: int = 0, b: int = 0) -> DayTest:
    """A day test with its parameters bound (a lambda in a loop would share its last)."""
    return lambda d: test(d, a, b)


def _in(allowed: list[int], of: Callable[[date], int]) -> DayTest:
    chosen = set(allowed)
    return lambda d: of(d) in chosen


def _day_of_month(field: str) -> DayTest:
    tests: list[DayTest] = []
    for part in field.split(","):
        if part == "L":
            tests.append(lambda d: d.day == _last(d))
        elif part == "LW":
            tests.append(lambda d: d == _last_weekday(d))
        elif part.endswith("W"):
            tests.append(_on(lambda d, t, _: _nearest_weekday(d, t), int(part[:-1])))
        else:
            tests.append(_in(_values(part, 1, 31), lambda d: d.day))
    return lambda d: any(test(d) for test in tests)


def _day_of_week(field: str) -> DayTest:
    tests: list[DayTest] = []
    for part in field.split(","):
        if "#" in part:  # n#k: the k-th such weekday of the month
            weekday_text, nth = part.split("#")
            tests.append(
                _on(
                    lambda d, w, n: _weekday(d) == w and (d.day - 1) // 7 + 1 == n,
                    _number(weekday_text, _DAYS),
                    int(nth),
                )
            )
        elif part.endswith("L") and part != "L":  # nL: the month's last such weekday
            tests.append(
                _on(
                    lambda d, w, _: _weekday(d) == w and d.day + 7 > _last(d),
                    _number(part[:-1], _DAYS),
                )
            )
        else:  # L alone: Saturday, the week's last day
            tests.append(_in(_values("7" if part == "L" else part, 1, 7, _DAYS), _weekday))
    return lambda d: any(test(d) for test in tests)
