"""One check for EventBridge Scheduler's expressions and time zones, shared by declare,
`pgkick schedules sync` and the local stack's scheduler (issue 31.4).

Catches: the loose check before it (a pattern of allowed characters per field), which let
15 of the first 23 bad expressions below through to AWS, and a check that one of the three places
skips (sync of a Periodic built by hand, the local scheduler's next tick)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from pgkick.aws.schedules import sync
from pgkick.errors import InvalidArgument
from pgkick.tasks.recurring import Periodic, PeriodicRegistry, declare, parse_tick
from pgkick_dev.local.cron import next_tick

WORKER = "arn:aws:lambda:us-east-1:123456789012:function:pgkick-worker"
ROLE = "arn:aws:iam::123456789012:role/pgkick-scheduler"

BAD = [
    ("cron(60 * * * ? *)", "minutes field '60' is not valid: 60 is outside 0-59"),
    ("cron(99 * * * ? *)", "minutes field '99' is not valid: 99 is outside 0-59"),
    ("cron(0 24 * * ? *)", "hours field '24' is not valid: 24 is outside 0-23"),
    ("cron(0 0 32 * ? *)", "day-of-month field '32' is not valid: 32 is outside 1-31"),
    ("cron(0 0 1 13 ? *)", "month field '13' is not valid: 13 is outside 1-12"),
    ("cron(0 0 ? * 8 *)", "day-of-week field '8' is not valid: 8 is outside 1-7"),
    ("cron(0 0 1 1 ? 1800)", "year field '1800' is not valid: 1800 is outside 1970-2199"),
    ("cron(0 0 1 1 ? 2200)", "year field '2200' is not valid: 2200 is outside 1970-2199"),
    ("cron(*/0 * * * ? *)", "minutes field '*/0' is not valid: the increment '0' must be 1-60"),
    ("cron(0- * * * ? *)", "minutes field '0-' is not valid: '' is not a value (0-59)"),
    ("cron(, * * * ? *)", "minutes field ',' is not valid: an empty list item"),
    ("cron(0 0 * FOO ? *)", "month field 'FOO' is not valid: 'FOO' is not a value (1-12 or JAN"),
    ("cron(0 0 ? * BAR *)", "day-of-week field 'BAR' is not valid: 'BAR' is not a value (1-7"),
    ("cron(0 0 ? * MON#9 *)", "'#9': the week of the month must be 1-5"),
    ("cron(5-1 * * * ? *)", "minutes field '5-1' is not valid: the range '5-1' runs backwards"),
    # the eight the old check caught already
    ("cron(0 3 * * *)", "has 5 fields; EventBridge cron has 6"),
    ("cron(0 3 * * * *)", "exactly one of day-of-month and day-of-week must be '?'"),
    ("cron(0 3 ? * ? *)", "exactly one of day-of-month and day-of-week must be '?'"),
    ("cron(0 3$ * * ? *)", "hours field '3$' is not valid"),
    ("rate(0 minutes)", "use rate(1 minute)"),
    ("rate(-5 minutes)", "is neither cron("),
    ("rate(5 weeks)", "is neither cron("),
    ("cron(0 0 ? * 2#1,6#3 *)", "'#' must be the field's only expression"),
    # a final newline: Python's `$` matches before it (review 59, F1)
    ("cron(0 3 * * ? *)\n", "is neither cron("),
    ("rate(5 minutes)\n", "is neither cron("),
    # digits that are not ASCII: str.isdigit() and \\d take any script's (review 59, F2)
    ("cron(\u0663 3 * * ? *)", "minutes field '\u0663' is not valid: '\u0663' is not a value"),
    ("rate(\u0665 minutes)", "is neither cron("),
    ("cron(0 3 \uff11\uff15 * ? *)", "day-of-month field '\uff11\uff15' is not valid"),
    ("cron(\u00b2 3 * * ? *)", "minutes field '\u00b2' is not valid: '\u00b2' is not a value"),
    ("cron(*/\u00b2 * * * ? *)", "minutes field '*/\u00b2' is not valid: the increment"),
    ("cron(0 0 ? * 2#\u00b2 *)", "'#\u00b2': the week of the month must be 1-5"),
    # separators Python's str.split() takes for spaces and the scheduler does not (review 61,
    # F1): a no-break space, an em space, a unit separator, a tab
    ("cron(0\u00a03 * * ? *)", "'\\xa0' is not allowed: fields are separated by spaces"),
    ("cron(0 3 * * ? *\u2003)", "the character '\\u2003' is not allowed"),
    ("cron(0\x1f3 * * ? *)", "the character '\\x1f' is not allowed"),
    ("cron(0\t3 * * ? *)", "the character '\\t' is not allowed"),
]
BAD_ZONES = ["localtime", "Factory", "posixrules", "posix/Europe/Paris", "right/UTC", "EST5EDT"]
GOOD = [
    "cron(0 3 * * ? *)",
    "cron(0/15 8-17 ? * MON-FRI *)",
    "cron(0 12 L * ? 2026-2030)",
    "cron(0 12 ? * 6#3 *)",
    "cron(0 12 ? * 6L *)",
    "cron(0 12 15W * ? *)",
    "cron(0 12 LW * ? *)",
    "cron(0 0 1 JAN,JUL ? 2027)",
    "cron(59 23 31 12 ? 2199)",
    "rate(1 minute)",
    "rate(5 minutes)",
]


class NoCalls:
    """A scheduler client that fails the test if anything reaches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the sync called AWS ({name}) with a bad declaration")


@pytest.mark.parametrize(("expression", "message"), BAD)
def test_a_bad_expression_is_refused_by_declare_sync_and_the_local_scheduler_alike(
    expression: str, message: str
) -> None:
    into = PeriodicRegistry()
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        declare(expression, task="nightly", into=into)
    assert into.declared == {}
    by_hand = Periodic("nightly", expression, "UTC", "nightly", "default")
    with pytest.raises(InvalidArgument) as synced:
        sync(NoCalls(), [by_hand], target_arn=WORKER, role_arn=ROLE, dry_run=True)
    with pytest.raises(InvalidArgument) as local:
        next_tick(expression, "UTC", datetime(2026, 1, 1, tzinfo=UTC))
    assert str(synced.value) == str(local.value)


@pytest.mark.parametrize("name", ["nightly\n", "night ly", "", "x" * 49, "n\u0663"])
def test_a_bad_periodic_name_is_refused_by_declare_check_sync_and_a_tick_alike(name: str) -> None:
    """Catches a name with a final newline passing (`$` matches before it: AWS refuses the
    schedule name) and Periodic.check(), the one sync runs, not checking the name at all."""
    with pytest.raises(InvalidArgument, match="periodic name"):
        declare("rate(5 minutes)", task="t", name=name, into=PeriodicRegistry())
    by_hand = Periodic(name, "rate(5 minutes)", "UTC", "t", "default")
    with pytest.raises(InvalidArgument, match="periodic name"):
        by_hand.check()
    with pytest.raises(InvalidArgument, match="periodic name"):
        sync(NoCalls(), [by_hand], target_arn=WORKER, role_arn=ROLE, dry_run=True)
    with pytest.raises(InvalidArgument, match="is not a periodic name"):
        parse_tick({"periodic": name, "tick": "2026-11-30T03:00:00Z"})


@pytest.mark.parametrize("task", ["reports.nightly", "t" * 60])
def test_a_task_name_that_is_no_schedule_name_says_to_pass_name(task: str) -> None:
    """Catches (review 61, F2): a task name may hold dots and 200 characters, a schedule's
    name may not; with no name= given, the refusal spoke of a "periodic name" the user never
    wrote and did not say what to do."""
    with pytest.raises(InvalidArgument) as refused:
        declare("cron(0 3 * * ? *)", task=task, into=PeriodicRegistry())
    assert str(refused.value) == (
        f"periodic name: none given, and the task's, {task!r}, is not 1-48 of A-Z a-z 0-9 _ -: "
        "pass name='...' (the schedule's name, pgkick.periodic.<name>)"
    )


@pytest.mark.parametrize("zone", BAD_ZONES)
def test_a_zone_that_is_no_region_is_refused_everywhere(zone: str) -> None:
    with pytest.raises(InvalidArgument, match="is not an IANA time zone"):
        declare("cron(0 3 * * ? *)", task="nightly", timezone=zone, into=PeriodicRegistry())
    by_hand = Periodic("nightly", "cron(0 3 * * ? *)", zone, "nightly", "default")
    with pytest.raises(InvalidArgument, match="is not an IANA time zone"):
        sync(NoCalls(), [by_hand], target_arn=WORKER, role_arn=ROLE, dry_run=True)
    with pytest.raises(InvalidArgument, match="is not an IANA time zone"):
        next_tick("cron(0 3 * * ? *)", zone, datetime(2026, 1, 1, tzinfo=UTC))


def test_good_expressions_pass_all_three_and_the_local_scheduler_finds_a_tick() -> None:
    """Catches a check so strict the scheduler's own forms are refused."""
    into = PeriodicRegistry()
    for n, expression in enumerate(GOOD):
        for zone in ("UTC", "Europe/Paris", "Etc/GMT+5", "America/Argentina/Buenos_Aires"):
            declare(expression, task="t", name=f"p{n}", timezone=zone, into=PeriodicRegistry())
            assert next_tick(expression, zone, datetime(2026, 1, 1, tzinfo=UTC)) is not None
        declare(expression, task="t", name=f"p{n}", into=into)
    assert len(into.declared) == len(GOOD)
