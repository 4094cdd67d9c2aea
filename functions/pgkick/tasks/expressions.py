"""EventBridge Scheduler's schedule expressions and time zones: the one check pgkick has.

Why one check: a declaration is checked at `@pgkick.periodic` (declare), again by
`pgkick schedules sync` before its first AWS call, and by the local stack's scheduler
(pgkick_dev.local.cron) before it computes a tick. Three checks would drift; an expression
one accepts and AWS refuses fails at deploy, and one the local stack refuses fails in the
app's hands. Each rule below is the scheduler's documented one, so what passes here is what
CreateSchedule accepts.

The rules, from "Schedule types on EventBridge Scheduler"
(https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html) and
"Cron expressions reference" (https://docs.aws.amazon.com/eventbridge/latest/userguide/
eb-cron-expressions.html):

- cron(minutes hours day-of-month month day-of-week year), six fields:
  minutes 0-59, hours 0-23, day-of-month 1-31, month 1-12 or JAN-DEC,
  day-of-week 1-7 or SUN-SAT (1 = Sunday), year 1970-2199.
- Wildcards: `,` (a list) `-` (a range) `*` (every value) `/` (increments: start/step)
  in every field but day-of-week; `?` (any) in day-of-month and day-of-week only;
  `L` (last) in day-of-month and day-of-week; `W` (nearest weekday) in day-of-month;
  `#` (n-th weekday of the month, 1-5) in day-of-week, and then as its only expression
  ("3#1,6#3" is invalid).
- Exactly one of day-of-month and day-of-week is `?` (a value or `*` in one needs `?`
  in the other).
- The fields are separated by spaces: Python's str.split() also splits on a tab, a
  no-break space or a unit separator, which the scheduler does not read as one.
- rate(value unit): value a positive integer, unit minute(s), hour(s) or day(s);
  `1 minute` singular, `5 minutes` plural.
- Time zones: IANA names. Names that are files of the zone database but not zones of a
  region are refused: `localtime` and `posixrules` (this machine's setting, not a zone),
  `Factory` (no offset at all), the `posix/` and `right/` copies, and the old
  abbreviation-style names (CET, EST5EDT, US/Eastern): a region name (Europe/Paris,
  America/New_York) or UTC / Etc/... says the same without ambiguity.

What is not checked (AWS checks it and pgkick cannot): that the expression ever fires
(cron(0 0 31 FEB ? *) passes here and never ticks).
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pgkick.errors import InvalidArgument, InvalidArgumentType

# Matched whole (fullmatch), digits spelled [0-9]: `$` matches before a final newline, and
# `\d` (like str.isdigit()) takes any script's digits; the scheduler reads ASCII only.
RATE = re.compile(r"rate\(([0-9]{1,6}) (minute|minutes|hour|hours|day|days)\)")
CRON = re.compile(r"cron\((.*)\)")
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
FIRST_YEAR, LAST_YEAR = 1970, 2199
# name, low, high, names, special wildcards allowed (besides , - * /)
FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minutes", 0, 59, ()),
    ("hours", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day-of-week", 1, 7, DAYS),
    ("year", FIRST_YEAR, LAST_YEAR, ()),
)
# IANA's region areas (and Etc): a zone named Area/Location is a region's.
ZONE_AREAS = frozenset(
    {"Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe"}
    | {"Indian", "Pacific", "Etc"}
)
UTC_NAMES = frozenset({"UTC", "GMT"})


def check_expression(expression: object) -> str:
    """A `cron(...)` or `rate(...)` EventBridge Scheduler accepts; InvalidArgument naming
    the field and the part that it would refuse."""
    if not isinstance(expression, str):
        raise InvalidArgumentType(f"schedule: must be a string, got {type(expression).__name__}")
    rate = RATE.fullmatch(expression)
    if rate:
        value, unit = int(rate.group(1)), rate.group(2)
        single = unit.rstrip("s")
        if value < 1 or (value == 1) != (unit == single):
            raise InvalidArgument(
                f"schedule: {expression!r}: use rate(1 {single}) or rate(N {single}s), N > 1"
            )
        return expression
    cron = CRON.fullmatch(expression)
    if not cron:
        raise InvalidArgument(
            f"schedule: {expression!r} is neither cron(min hour day-of-month month "
            "day-of-week year) nor rate(N minutes|hours|days)"
        )
    odd = next((c for c in cron.group(1) if c != " " and _blank_or_control(c)), None)
    if odd is not None:  # str.split() would take it for a space; the scheduler does not
        raise InvalidArgument(
            f"schedule: {expression!r}: the character {odd!r} is not allowed: fields are "
            "separated by spaces (ASCII 32)"
        )
    fields = cron.group(1).split()
    if len(fields) != len(FIELDS):
        raise InvalidArgument(
            f"schedule: {expression!r} has {len(fields)} fields; EventBridge cron has 6: "
            + " ".join(name for name, *_ in FIELDS)
        )
    for value, (name, low, high, names) in zip(fields, FIELDS, strict=True):
        try:
            _check_field(name, value, low, high, names)
        except InvalidArgument as why:  # the part's own words, put in context
            raise InvalidArgument(
                f"schedule: {expression!r}: {name} field {value!r} is not valid: {why}"
            ) from None
    if (fields[2] == "?") == (fields[4] == "?"):
        raise InvalidArgument(
            f"schedule: {expression!r}: exactly one of day-of-month and day-of-week must be '?'"
        )
    return expression


def _check_field(name: str, field: str, low: int, high: int, names: tuple[str, ...]) -> None:
    if field == "?":
        if name not in ("day-of-month", "day-of-week"):
            raise InvalidArgument("'?' is for day-of-month or day-of-week only")
        return
    parts = field.split(",")
    if name == "day-of-week" and "#" in field and len(parts) > 1:
        raise InvalidArgument("'#' must be the field's only expression")
    for part in parts:
        if part == "":
            raise InvalidArgument("an empty list item")
        if name == "day-of-month" and _day_of_month_special(part):
            continue
        if name == "day-of-week" and _day_of_week_special(part):
            continue
        base, slash, step = part.partition("/")
        if slash:
            if name == "day-of-week":
                raise InvalidArgument("'/' is not allowed in day-of-week")
            if not _digits(step) or not 1 <= int(step) <= high - low + 1:
                raise InvalidArgument(f"the increment {step!r} must be 1-{high - low + 1}")
        if base == "*":
            continue
        first, dash, last = base.partition("-")
        start = _value(first, low, high, names)
        if dash:
            end = _value(last, low, high, names)
            if start > end:
                raise InvalidArgument(f"the range {base!r} runs backwards")


def _blank_or_control(char: str) -> bool:
    """A character str.split() splits on (a tab, a no-break space, an em space, a unit
    separator) or one that prints as nothing: none is a field separator to the scheduler."""
    return char.isspace() or not char.isprintable()


def _digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() is also true of Arabic-Indic, full-width and
    superscript digits (int() fails on the last), which the scheduler does not read."""
    return text.isascii() and text.isdigit()


def _value(text: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if _digits(text) and len(text) <= 4:
        number = int(text)
    elif text.upper() in names:
        number = names.index(text.upper()) + low
    else:
        what = f"{low}-{high}" + (f" or {names[0]}-{names[-1]}" if names else "")
        raise InvalidArgument(f"{text!r} is not a value ({what})")
    if not low <= number <= high:
        raise InvalidArgument(f"{number} is outside {low}-{high}")
    return number


def _day_of_month_special(part: str) -> bool:
    """L (the last day), LW (the last weekday), nW (the weekday nearest day n)."""
    if part in ("L", "LW"):
        return True
    if part.endswith("W"):
        _value(part[:-1], 1, 31, ())
        return True
    if "L" in part or "W" in part:
        raise InvalidArgument("L and W are written L, LW or nW (n 1-31)")
    return False


def _day_of_week_special(part: str) -> bool:
    """L (Saturday), nL (the month's last such day), n#k (its k-th, 1-5)."""
    if part == "L":
        return True
    if part.endswith("L"):
        _value(part[:-1], 1, 7, DAYS)
        return True
    if "#" in part:
        day, _, nth = part.partition("#")
        _value(day, 1, 7, DAYS)
        if not _digits(nth) or not 1 <= int(nth) <= 5:
            raise InvalidArgument(f"'#{nth}': the week of the month must be 1-5")
        return True
    return False


def check_timezone(timezone: object) -> str:
    """An IANA region's zone name (or UTC), as EventBridge Scheduler takes it."""
    if not isinstance(timezone, str):
        raise InvalidArgumentType(f"timezone: must be a string, got {type(timezone).__name__}")
    area = timezone.split("/", 1)[0]
    regional = timezone in UTC_NAMES or (area in ZONE_AREAS and "/" in timezone)
    if not regional:
        raise InvalidArgument(
            f"timezone: {timezone!r} is not an IANA time zone of a region: use a name like "
            "Europe/Paris or America/New_York, or UTC"
        )
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(f"timezone: {timezone!r} is not an IANA time zone name") from None
    return timezone
