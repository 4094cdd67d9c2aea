"""Booking wake-ups against a Scheduler as strict as AWS (issue #30, defects 2 and 3): the
Lambda kicker through boto3 over HTTP against the dev stack's Scheduler API (ManualClock).

- throttled CreateSchedule calls are retried with jittered backoff, within a budget;
- every wake-up and rescue carries a RetryPolicy, and the DeadLetterConfig when
  PGKICK_SCHEDULE_DLQ_ARN is set;
- a hand-over "now" is tried a margin ahead and, refused as past, booked a minute further;
- delayed jobs enqueued in bulk are booked off the commit path, one call per queue and
  minute: the producer returns while the Scheduler is held."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.config import Config

from pgkick.config import Settings
from pgkick.kick.default import make_kicker
from pgkick.kick.kickers import schedule_name, wake_minute
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.kick.throttle import Backoff
from pgkick.producer import enqueue as producer
from tests.devserver_fixtures import FUNCTION, Running, dev_stack

ARN = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
ROLE = "arn:aws:iam::123456789012:role/pgkick-scheduler"
DLQ = "arn:aws:sqs:us-east-1:123456789012:pgkick-failed-kicks"


def kicker_for(dev: Running, **options: object) -> LambdaKicker:
    return LambdaKicker(
        FUNCTION,
        function_arn=ARN,
        scheduler_role_arn=ROLE,
        scheduler_client=dev.scheduler,
        **options,  # type: ignore[arg-type]
    )


def manual_backoff(dev: Running, budget: float = 3.0) -> Backoff:
    """Sleeps move the stack's ManualClock: the per-second window slides, no real wait."""
    return Backoff(budget=budget, sleep=dev.clock.advance, monotonic=dev.clock.now,
                   rand=random.Random(3))  # fmt: skip


def test_a_throttled_booking_is_retried_with_jittered_backoff() -> None:
    """Twelve processes book the same rescue in one second: Scheduler's 10 TPS per schedule
    throttles the eleventh and twelfth. On main the ThrottlingException was counted and the
    rescue lost; now each is retried after a jittered pause and ends as a ConflictException
    (booked already), which is success."""
    with dev_stack() as dev:
        when = datetime.fromtimestamp(dev.clock.now() + 600, UTC)
        backoff = manual_backoff(dev)
        for _ in range(12):
            kicker_for(dev, backoff=backoff).book_rescue("default", when, "pgkick-rescue-same")
        assert backoff.retries >= 2 and backoff.gave_up == 0


def test_a_throttled_booking_gives_up_within_its_budget() -> None:
    """Bounded: a Scheduler that throttles every call holds a caller at most its budget."""
    with dev_stack() as dev:
        dev.stack.scheduler.faults.api_throttle_rate = 1.0
        backoff = manual_backoff(dev, budget=1.0)
        start = dev.clock.now()
        when = datetime.fromtimestamp(start + 600, UTC)
        with pytest.raises(dev.scheduler.exceptions.ThrottlingException):
            kicker_for(dev, backoff=backoff).book_rescue("default", when, "pgkick-rescue-x")
        assert backoff.retries >= 3 and backoff.gave_up == 1
        assert dev.clock.now() - start <= 1.0


@pytest.mark.parametrize("dlq", [None, DLQ])
def test_every_wake_up_and_rescue_has_a_retry_policy_and_the_dead_letter_queue(
    dlq: str | None,
) -> None:
    env = {"PGKICK_WORKER_FUNCTION": ARN, "PGKICK_SCHEDULER_ROLE_ARN": ROLE}
    if dlq:
        env["PGKICK_SCHEDULE_DLQ_ARN"] = dlq
    kicker = make_kicker(Settings.from_env(env))
    assert isinstance(kicker, LambdaKicker)
    with dev_stack() as dev:
        kicker._scheduler = dev.scheduler
        when = datetime.fromtimestamp(dev.clock.now() + 600, UTC)
        kicker.wake_at("default", when)
        kicker.book_rescue("default", when, "pgkick-rescue-1")
        assert kicker.flush(10)
        names = [s["Name"] for s in dev.scheduler.list_schedules()["Schedules"]]
        assert len(names) == 2
        for name in names:
            target = dev.scheduler.get_schedule(Name=name)["Target"]
            assert target["RetryPolicy"] == {
                "MaximumEventAgeInSeconds": 3600,
                "MaximumRetryAttempts": 185,
            }
            assert target.get("DeadLetterConfig") == ({"Arn": dlq} if dlq else None)


def test_a_hand_over_for_now_is_booked_where_scheduler_accepts_it() -> None:
    """Defect 2: after the hop budget a worker books a wake-up for "now"; main rounded it up
    to the next minute, as little as a moment ahead, and Scheduler refuses an at() already
    past by the time it reads it. Here Scheduler's clock reads just past that minute (a round
    trip, a clock a little off): tried a margin ahead, the wake-up is refused, then booked a
    minute and a margin ahead, and accepted."""
    now = datetime.now(UTC)
    with dev_stack(start=wake_minute(now).timestamp() + 1) as dev:
        kicker = kicker_for(dev)
        kicker.wake_at("default", now)
        assert kicker.flush(10) and kicker.wakes.stats.failures == 0
        (schedule,) = dev.scheduler.list_schedules()["Schedules"]
        assert dev.scheduler.get_schedule(Name=schedule["Name"])["ScheduleExpression"]


def test_a_wake_up_whose_minute_went_by_before_its_booking_is_booked_at_the_next() -> None:
    """A wake-up is noted at once and booked by a background thread. If that thread runs
    after the minute (a Lambda environment frozen when its handler returned, then thawed
    minutes later), Scheduler refuses the at() as past; the wake-up used to be given up (the
    job then waited for a sweep or the daily reaper). Now it is booked again, at the first
    minute Scheduler takes, with the retry policy every wake-up has."""
    with dev_stack(start=time.time()) as dev:  # Scheduler's clock and the kicker's agree
        kicker = kicker_for(dev)
        gone = wake_minute(datetime.fromtimestamp(dev.clock.now(), UTC)) - timedelta(minutes=3)
        kicker.wakes.book(schedule_name("default", gone), gone, "default")  # as a thawed thread
        assert kicker.flush(10) and kicker.wakes.stats.failures == 0
        (listed,) = dev.scheduler.list_schedules()["Schedules"]
        schedule = dev.scheduler.get_schedule(Name=listed["Name"])
        at = datetime.fromisoformat(schedule["ScheduleExpression"][3:-1]).replace(tzinfo=UTC)
        assert at.timestamp() - dev.clock.now() > 60 and at.second == 0, schedule
        assert listed["Name"] == schedule_name("default", at)
        assert '"wake"' in schedule["Target"]["Input"] and schedule["Target"]["RetryPolicy"]


def test_delayed_jobs_in_bulk_are_booked_off_the_commit_path_once_per_minute(dsn: str) -> None:
    """Defect 3: enqueue_many of delayed jobs over many distinct minutes returned only once
    every CreateSchedule was made, one after another. With the Scheduler held (its lock taken:
    every call waits), the producer still returns at once; then one call per queue and
    minute is made, and no more."""
    with dev_stack() as dev:
        held = boto3.client(
            "scheduler",
            endpoint_url=dev.url,
            region_name="us-east-1",
            aws_access_key_id="dev",
            aws_secret_access_key="dev",
            config=Config(read_timeout=0.2, connect_timeout=0.2, retries={"total_max_attempts": 1}),
        )
        kicker = LambdaKicker(FUNCTION, function_arn=ARN, scheduler_role_arn=ROLE,
                              scheduler_client=held)  # fmt: skip
        base = datetime.fromtimestamp(dev.clock.now(), UTC) + timedelta(hours=1)
        jobs = [
            {"payload": {"n": n}, "task": "noop", "run_at": base + timedelta(minutes=n // 2)}
            for n in range(100)  # two jobs a minute: 50 distinct minutes
        ]
        with dev.stack.scheduler._lock:
            started = time.monotonic()
            producer.enqueue_many(jobs, dsn=dsn, kicker=kicker)
            blocked = time.monotonic() - started
        assert blocked < 1.0, f"the producer was held {blocked:.2f} s after its commit"
        assert kicker.flush(60)
        assert kicker.wakes.stats.calls == 50  # one per queue and minute (a timed-out call too)
        assert len(dev.scheduler.list_schedules()["Schedules"]) == 50
