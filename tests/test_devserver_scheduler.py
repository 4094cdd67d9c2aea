"""The dev server's EventBridge Scheduler API through boto3 over HTTP: the calls pgkick makes,
AWS's exceptions, and firing within the minute (not to the hundredth of a second) unless
the labelled kindness --fast-scheduler is on. Time is a ManualClock; no sleeps."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from pgkick.aws.schedules import sync
from pgkick.tasks.recurring import Periodic
from pgkick_dev.local.client import DevClient
from tests.devserver_fixtures import FUNCTION, dev_stack

TARGET = {
    "Arn": f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}",
    "RoleArn": "arn:aws:iam::123456789012:role/r",
    "Input": json.dumps({"queue": "default", "reason": "wake"}),
}


def _at(seconds: float) -> str:
    return f"at({datetime.fromtimestamp(seconds, UTC):%Y-%m-%dT%H:%M:%S})"


def test_create_get_list_delete_and_the_schedulers_errors() -> None:
    with dev_stack() as dev:
        s = dev.scheduler
        due = dev.clock.now() + 120
        arn = s.create_schedule(
            Name="pgkick-default-1",
            ScheduleExpression=_at(due),
            FlexibleTimeWindow={"Mode": "OFF"},
            Target=TARGET,
        )["ScheduleArn"]
        assert arn.endswith(":schedule/default/pgkick-default-1")
        got = s.get_schedule(Name="pgkick-default-1", GroupName="default")
        assert got["ScheduleExpression"] == _at(due) and got["Target"]["Input"] == TARGET["Input"]
        names = [x["Name"] for x in s.list_schedules(NamePrefix="pgkick-")["Schedules"]]
        assert names == ["pgkick-default-1"]
        with pytest.raises(s.exceptions.ConflictException):
            s.create_schedule(
                Name="pgkick-default-1",
                ScheduleExpression=_at(due),
                FlexibleTimeWindow={"Mode": "OFF"},
                Target=TARGET,
            )
        with pytest.raises(s.exceptions.ValidationException):
            s.create_schedule(
                Name="bad",
                ScheduleExpression="every(5)",
                FlexibleTimeWindow={"Mode": "OFF"},
                Target=TARGET,
            )
        s.delete_schedule(Name="pgkick-default-1")
        with pytest.raises(s.exceptions.ResourceNotFoundException):
            s.get_schedule(Name="pgkick-default-1")
        with pytest.raises(s.exceptions.ResourceNotFoundException):
            s.delete_schedule(Name="pgkick-default-1")


@pytest.mark.parametrize("fast", [False, True])
def test_a_one_time_schedule_fires_within_the_minute_then_deletes_itself(fast: bool) -> None:
    """Catches a scheduler that fires on the dot (the old stand-in's timers, to the hundredth
    of a second): EventBridge Scheduler fires within the minute after the time."""
    with dev_stack(fast_scheduler=fast) as dev:
        due = dev.clock.now() + 120
        dev.scheduler.create_schedule(
            Name="w",
            ScheduleExpression=_at(due),
            Target=TARGET,
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
        )
        (fires,) = dev.clock.pending()
        assert fires == due if fast else due < fires < due + 60
        dev.clock.advance(fires - dev.clock.now() - 0.01)
        assert "schedule_fire" not in dev.stack.timeline.events()
        dev.clock.advance(0.01)
        assert [e["kind"] for e in dev.stack.timeline.events()][1:4] == [
            "schedule_fire",
            "schedule_delete",
            "kick",
        ]
        with pytest.raises(dev.scheduler.exceptions.ResourceNotFoundException):
            dev.scheduler.get_schedule(Name="w")


@pytest.mark.parametrize("fast", [False, True])
def test_a_wake_up_is_booked_at_the_next_whole_minute(fast: bool) -> None:
    """What PGKICK_KICKER=local's client books for a job due in 1.5 s, over the Scheduler API:
    the minute it falls in (as LambdaKicker books it), fired within that minute. Catches a
    wake-up fired at the job's run_at to the hundredth of a second."""
    with dev_stack(fast_scheduler=fast) as dev:
        start = dev.clock.now()  # a whole minute
        DevClient(dev.url, FUNCTION).wake_at("default", datetime.fromtimestamp(start + 1.5, UTC))
        (schedule,) = dev.scheduler.list_schedules()["Schedules"]
        got = dev.scheduler.get_schedule(Name=schedule["Name"])
        assert got["ScheduleExpression"] == _at(start + 60)
        (fires,) = dev.clock.pending()
        assert (fires == start + 60) if fast else (start + 60 < fires < start + 120)


def test_a_rate_schedule_fires_every_period() -> None:
    with dev_stack() as dev:
        dev.scheduler.create_schedule(
            Name="pgkick.periodic.p",
            ScheduleExpression="rate(1 minute)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target=TARGET,
        )
        dev.clock.advance(60 * 3)
        fired = [e for e in dev.stack.timeline.events() if e["kind"] == "schedule_fire"]
        assert len(fired) in (2, 3)  # ticks at +60, +120, +180, each within its minute
        assert dev.scheduler.get_schedule(Name="pgkick.periodic.p")["Name"] == "pgkick.periodic.p"


def test_list_schedules_pages_as_aws_does_and_a_sync_reads_every_page() -> None:
    """Catches (review 61, F3): a stand-in answering every schedule in one page, MaxResults
    ignored and no NextToken, where AWS answers 100 at most (botocore's model: MaxResults
    1-100), so `pgkick schedules sync` never read a second page locally. Past 100 periodic
    schedules, a sync that stopped at the first page would re-create the rest (Conflict)."""
    periodics = [
        Periodic(f"p{n:03}", "cron(0 3 * * ? *)", "UTC", "t", "default") for n in range(130)
    ]
    with dev_stack() as dev:
        s = dev.scheduler
        assert (
            len(sync(s, periodics, target_arn=TARGET["Arn"], role_arn=TARGET["RoleArn"])["created"])
            == 130
        )
        first = s.list_schedules(GroupName="default")
        assert len(first["Schedules"]) == 100 and first["NextToken"]
        second = s.list_schedules(GroupName="default", NextToken=first["NextToken"])
        assert len(second["Schedules"]) == 30 and "NextToken" not in second
        pages = s.get_paginator("list_schedules").paginate(
            GroupName="default", PaginationConfig={"PageSize": 50}
        )
        assert [len(page["Schedules"]) for page in pages] == [50, 50, 30]
        with pytest.raises(s.exceptions.ValidationException):
            s.list_schedules(GroupName="default", NextToken="not a token")
        again = sync(s, periodics, target_arn=TARGET["Arn"], role_arn=TARGET["RoleArn"])
        assert len(again["unchanged"]) == 130 and again["created"] == []


def test_an_update_keeps_the_creation_date_and_moves_the_modification_date() -> None:
    """Catches (review 61, F8) UpdateSchedule answered as a new schedule: its CreationDate
    moved to the update's time. AWS keeps CreationDate and sets LastModificationDate."""
    with dev_stack() as dev:
        s, due = dev.scheduler, dev.clock.now() + 600
        call = {"FlexibleTimeWindow": {"Mode": "OFF"}, "Target": TARGET}
        s.create_schedule(Name="u", ScheduleExpression=_at(due), **call)
        created = s.get_schedule(Name="u")["CreationDate"]
        dev.clock.advance(30)
        s.update_schedule(Name="u", ScheduleExpression=_at(due + 60), **call)
        got = s.get_schedule(Name="u")
        assert got["CreationDate"] == created
        assert (got["LastModificationDate"] - created).total_seconds() == 30
        listed = s.list_schedules()["Schedules"][0]
        assert listed["CreationDate"] == created and listed["LastModificationDate"] > created
