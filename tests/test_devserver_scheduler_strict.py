"""The local Scheduler is as strict as AWS (issue #30), through boto3 over HTTP, on a
ManualClock: an at() in the past refused, schedules fired within their minute (and within a
flexible window), CreateSchedule throttled at 10 TPS per schedule, a refused delivery
retried under the RetryPolicy, then dead-lettered (or dropped). Each test fails if the
stand-in is made kind again."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from pgkick.aws.schedules import sync
from pgkick.tasks.recurring import Periodic
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN
from tests.devserver_fixtures import FUNCTION, Running, dev_stack

TARGET: dict[str, Any] = {
    "Arn": f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}",
    "RoleArn": "arn:aws:iam::123456789012:role/r",
    "Input": json.dumps({"queue": "default", "reason": "wake"}),
}
DLQ = "arn:aws:sqs:us-east-1:123456789012:failed-kicks"


def _at(seconds: float) -> str:
    return f"at({datetime.fromtimestamp(seconds, UTC):%Y-%m-%dT%H:%M:%S})"


def _create(dev: Running, name: str, due: float, **extra: Any) -> None:
    group = {"GroupName": extra.pop("GroupName")} if "GroupName" in extra else {}
    dev.scheduler.create_schedule(
        **group,
        Name=name,
        ScheduleExpression=_at(due),
        FlexibleTimeWindow=extra.pop("FlexibleTimeWindow", {"Mode": "OFF"}),
        ActionAfterCompletion="DELETE",
        Target={**TARGET, **extra},
    )


def test_a_schedule_group_that_does_not_exist_is_refused() -> None:
    """Catches (note 59) a stand-in that took any GroupName: a wrong PGKICK_SCHEDULE_GROUP
    passed every local test and failed every booking deployed. Scheduler knows "default"
    and the template's groups; another is ResourceNotFoundException (404), as AWS says."""
    with dev_stack() as dev:
        client = dev.scheduler
        due = dev.clock.now() + 120
        with pytest.raises(client.exceptions.ResourceNotFoundException, match="group nope"):
            _create(dev, "w", due, GroupName="nope")
        for call in (client.get_schedule, client.delete_schedule):
            with pytest.raises(client.exceptions.ResourceNotFoundException, match="group nope"):
                call(Name="w", GroupName="nope")
        with pytest.raises(client.exceptions.ResourceNotFoundException, match="group nope"):
            client.list_schedules(GroupName="nope")
        _create(dev, "w", due, GroupName="default")
        assert dev.stack.scheduler.list() and not dev.stack.scheduler.dropped


def test_a_one_time_schedule_in_the_past_is_refused() -> None:
    with dev_stack() as dev:
        now = dev.clock.now()
        with pytest.raises(dev.scheduler.exceptions.ValidationException, match="in the past"):
            _create(dev, "late", now - 60)
        with pytest.raises(dev.scheduler.exceptions.ValidationException, match="in the past"):
            _create(dev, "late", now - 1)
        _create(dev, "on-time", now + 60)  # the future is fine


def test_one_time_schedules_fire_within_their_own_minute() -> None:
    """at(08:01:30) fires between 08:01:00 and 08:01:59 (60 s precision), never in the next
    minute: the old stand-in fired up to 59 s after the time itself."""
    with dev_stack() as dev:
        minute = dev.clock.now() + 60  # a whole minute
        for n in range(20):
            _create(dev, f"w{n}", minute + 30)
        fires = dev.clock.pending()
        assert len(fires) == 20 and all(minute <= at < minute + 60 for at in fires)
        assert min(fires) < minute + 30  # some before the :30 itself, as the minute allows


def test_a_flexible_time_window_fires_at_a_random_moment_within_it() -> None:
    with dev_stack() as dev:
        due = dev.clock.now() + 120
        window = {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}
        for n in range(20):
            _create(dev, f"f{n}", due, FlexibleTimeWindow=window)
        fires = dev.clock.pending()
        assert all(due <= at < due + 16 * 60 for at in fires)
        assert max(fires) > due + 5 * 60  # spread over the window, not within the first minute


def test_create_schedule_is_throttled_at_ten_calls_a_second_per_schedule() -> None:
    with dev_stack() as dev:
        due = dev.clock.now() + 120
        _create(dev, "busy", due)
        for _ in range(9):  # ten calls in this second: the others conflict, not throttled
            with pytest.raises(dev.scheduler.exceptions.ConflictException):
                _create(dev, "busy", due)
        with pytest.raises(dev.scheduler.exceptions.ThrottlingException):
            _create(dev, "busy", due)
        _create(dev, "other", due)  # per schedule: another name is not throttled
        dev.clock.advance(1.0)
        with pytest.raises(dev.scheduler.exceptions.ConflictException):
            _create(dev, "busy", due)  # a second later: allowed again


def test_a_refused_delivery_is_retried_then_dead_lettered_with_its_input() -> None:
    """The target refuses (Lambda throttles the invoke): Scheduler retries under the
    RetryPolicy, then sends the event, the Input itself, to the DLQ; the stack hands it to the
    worker as an SQS event (the template's event source mapping on FailedKicksQueue)."""
    with dev_stack() as dev:
        dev.stack.scheduler.faults.delivery_failure_rate = 1.0
        due = dev.clock.now() + 60
        policy = {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600}
        _create(dev, "w", due, RetryPolicy=policy, DeadLetterConfig={"Arn": DLQ})
        dev.clock.advance(60 + 60 + 30)  # fired, and three retries within 1+2+4 s (jittered)
        assert len(dev.events("schedule_retry")) == 3
        (letter,) = dev.stack.scheduler.letters
        assert letter.queue_arn == DLQ and json.loads(letter.body) == json.loads(TARGET["Input"])
        assert letter.attributes["ERROR_CODE"] == "TooManyRequestsException"
        assert letter.attributes["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts"
        (sqs,) = [e for e in dev.events("kick") if e["queue"] is None]  # the SQS batch
        assert dev.stack.scheduler.dropped == 0 and sqs["function"] == FUNCTION


def _sqs_batches(dev: Running) -> list[dict[str, Any]]:
    return [e for e in dev.events("kick") if str(e["detail"]).startswith("SQS batch")]


def _failed_kicks(dev: Running, *events: dict[str, Any]) -> None:
    """Each event an Event invoke the handler fails (no retries): an on-failure record."""
    for event in events:
        dev.lambda_.invoke(
            FunctionName=FUNCTION, InvocationType="Event", Payload=json.dumps(event).encode()
        )
    # every record on the queue before its first poll (at the clock's next move)
    dev.wait(
        lambda: (
            len(getattr(dev.stack.dead_letters.sources.get(FUNCTION), "messages", ()))
            == len(events)
        )
    )


def test_dead_letters_reach_the_worker_in_batches_of_its_event_sources_batch_size() -> None:
    """Catches a fixed batch of 10 (note 59): the template's FailedKicks event source says
    BatchSize 5, so twelve records are three invocations (5, 5, 2), as SQS hands them over;
    pgkick's template's BatchSize is what `pgkick dev` reads (test_devserver_settings)."""
    handler = "tests.devserver_handlers:sqs_partial"
    with dev_stack(handler, on_failure=True, max_retries=0, instant_throttle=True) as dev:
        _failed_kicks(dev, *[{"queue": "q", "n": n} for n in range(12)])
        for _ in range(3):  # a third batch finds both environments busy: retried in 1 s
            dev.clock.advance(1.0)
            dev.wait(lambda: dev.stack.idle())
        assert [e["detail"] for e in _sqs_batches(dev)] == [
            "SQS batch of 5",
            "SQS batch of 5",
            "SQS batch of 2",
        ]
        assert dev.stack.dead_letters.sources[FUNCTION].deleted == 12


def test_a_record_the_worker_reports_failed_comes_back_after_the_visibility_timeout() -> None:
    """Catches the SQS batch handed over as an asynchronous event (note 59): retried after 1
    and 2 minutes, then dropped, where SQS keeps a record the worker reported in
    batchItemFailures (or a batch whose invocation failed) and hands it over again once the
    queue's VisibilityTimeout (900 s) has passed, its ApproximateReceiveCount one higher,
    until the MessageRetentionPeriod; the records not reported are deleted."""
    handler = "tests.devserver_handlers:sqs_partial"
    with dev_stack(handler, on_failure=True, max_retries=0, drain_retention=3600) as dev:
        _failed_kicks(dev, {"queue": "q", "fail": True}, {"queue": "q", "fail": False})
        dev.clock.advance(1.0)
        dev.wait(lambda: dev.stack.idle())
        source = dev.stack.dead_letters.sources[FUNCTION]
        assert source.deleted == 1 and [m.receives for m in source.messages] == [1]
        dev.clock.advance(898.0)  # still invisible: not handed over again
        assert len(_sqs_batches(dev)) == 1
        dev.clock.advance(2.0)
        dev.wait(lambda: dev.stack.idle())
        assert len(_sqs_batches(dev)) == 2
        assert dev.stack.functions[FUNCTION].stats.results[-1]["receives"] == [2]
        for _ in range(3):  # received at 901, 1801, 2701 s; past 3600 s SQS deletes it
            dev.clock.advance(901.0)
            dev.wait(lambda: dev.stack.idle())
        assert source.messages == [] and source.expired == 1 and source.deleted == 1


def test_without_a_dead_letter_queue_the_event_is_dropped_after_its_maximum_age() -> None:
    with dev_stack() as dev:
        dev.stack.scheduler.faults.delivery_failure_rate = 1.0
        due = dev.clock.now() + 60
        policy = {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 120}
        _create(dev, "w", due, RetryPolicy=policy)
        dev.clock.advance(60 + 60 + 120 + 300)
        assert dev.stack.scheduler.dropped == 1 and dev.stack.scheduler.letters == []
        (drop,) = dev.events("schedule_drop")
        assert "MaximumEventAgeInSeconds" in drop["detail"]


def test_with_no_retry_policy_aws_defaults_keep_retrying_for_a_day() -> None:
    """AWS's default RetryPolicy: 185 attempts over 86,400 s; not given up after an hour."""
    with dev_stack() as dev:
        dev.stack.scheduler.faults.delivery_failure_rate = 1.0
        _create(dev, "w", dev.clock.now() + 60, DeadLetterConfig={"Arn": DLQ})
        dev.clock.advance(3600)
        assert len(dev.events("schedule_retry")) > 10
        assert dev.stack.scheduler.letters == [] and dev.stack.scheduler.dropped == 0
        dev.clock.advance(86_400)
        assert len(dev.stack.scheduler.letters) == 1


def test_a_periodic_tick_it_cannot_deliver_is_dead_lettered_as_synced() -> None:
    """Catches (review 59, F5): a periodic schedule `pgkick schedules sync` makes (here
    through boto3 against the stand-in) carrying no DeadLetterConfig: a tick the worker
    refuses for an hour was dropped, and FailedKicksQueue (which runs a dead-lettered tick,
    pgkick.aws.failed_kicks) never saw it. The stack hands the letter to the worker."""
    periodic = Periodic("hourly", "cron(0 * * * ? *)", "UTC", "hourly", "reports")
    with dev_stack() as dev:
        dev.stack.scheduler.faults.delivery_failure_rate = 1.0
        plan = sync(
            dev.scheduler,
            [periodic],
            target_arn=TARGET["Arn"],
            role_arn=TARGET["RoleArn"],
            dead_letter_arn=LOCAL_DLQ_ARN,
        )
        assert plan["created"] == ["pgkick.periodic.hourly"]
        first = (dev.clock.now() // 3600 + 1) * 3600  # the next whole hour: the first tick
        dev.clock.advance(first - dev.clock.now() + 60)
        dev.scheduler.delete_schedule(Name="pgkick.periodic.hourly")  # no further ticks
        dev.clock.advance(3600)  # its retries (an hour at most) run out: dead-lettered
        dev.wait(lambda: dev.stack.idle())  # the worker drained it (no second receive)
        dev.clock.advance(3600)
        assert dev.stack.scheduler.dropped == 0
        (letter,) = dev.stack.scheduler.letters
        assert letter.queue_arn == LOCAL_DLQ_ARN
        assert json.loads(letter.body) == {
            "periodic": "hourly",
            "tick": datetime.fromtimestamp(first, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        assert letter.attributes["EXHAUSTED_RETRY_CONDITION"] == "MaximumEventAgeInSeconds"
        (sqs,) = [e for e in dev.events("kick") if e["queue"] is None]  # the SQS batch
        assert sqs["function"] == FUNCTION


def test_create_schedule_refuses_what_aws_refuses_as_a_validation_exception() -> None:
    """Catches (review 59, F3) a stand-in kinder than AWS's API model (botocore's scheduler
    service-2.json): names past 64 characters or outside [0-9a-zA-Z-_.], an at() that is
    not yyyy-mm-ddThh:mm:ss (an offset silently dropped, a date alone), FLEXIBLE without
    its window, a RetryPolicy out of bounds, and an unknown zone answered with HTTP 500.
    Each is a ValidationException, HTTP 400, as AWS answers; the bounds themselves pass."""
    with dev_stack() as dev:
        now = dev.clock.now()
        day = datetime.fromtimestamp(now + 2 * 86_400, UTC)
        at = _at(now + 600)
        flexible = {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 5000}
        bad: list[tuple[str, dict[str, Any]]] = [
            ("a name of 65 characters", {"Name": "x" * 65}),
            ("a name with a space", {"Name": "bad name"}),
            ("a name with a newline", {"Name": "pgkick.periodic.nightly\n"}),
            ("a group outside the pattern", {"GroupName": "my group"}),
            ("at() with an offset", {"ScheduleExpression": f"at({day:%Y-%m-%dT%H:%M:%S}+05:00)"}),
            ("at() a date alone", {"ScheduleExpression": f"at({day:%Y-%m-%d})"}),
            ("at() without seconds", {"ScheduleExpression": f"at({day:%Y-%m-%d %H:%M})"}),
            ("FLEXIBLE without a window", {"FlexibleTimeWindow": {"Mode": "FLEXIBLE"}}),
            ("an unknown Mode", {"FlexibleTimeWindow": {"Mode": "SOMETIMES"}}),
            ("a window of 5000 minutes", {"FlexibleTimeWindow": flexible}),
            ("500 retry attempts", {"RetryPolicy": {"MaximumRetryAttempts": 500}}),
            ("an event age of 999999 s", {"RetryPolicy": {"MaximumEventAgeInSeconds": 999_999}}),
            ("an unknown zone for at()", {"ScheduleExpressionTimezone": "Mars/Base"}),
            ("a path for a zone", {"ScheduleExpressionTimezone": "../../etc/passwd"}),
        ]
        wrong = []
        for n, (what, change) in enumerate(bad):
            target = {
                **TARGET,
                **({"RetryPolicy": change.pop("RetryPolicy")} if "RetryPolicy" in change else {}),
            }
            call = {
                "Name": f"v{n}",
                "ScheduleExpression": at,
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "Target": target,
                **change,
            }
            try:
                dev.scheduler.create_schedule(**call)
                wrong.append(f"{what}: accepted")
            except dev.scheduler.exceptions.ValidationException as exc:
                assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 400
            except Exception as exc:
                wrong.append(f"{what}: {type(exc).__name__} {exc}")
        assert wrong == []
        assert dev.stack.scheduler.list() == []  # nothing was created by a refused call
        dev.scheduler.create_schedule(  # the bounds themselves are AWS's, and pass
            Name="x" * 64,
            GroupName="default",
            ScheduleExpression=at,
            ScheduleExpressionTimezone="America/New_York",  # west of UTC: still ahead
            FlexibleTimeWindow={"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 1440},
            Target={
                **TARGET,
                "RetryPolicy": {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86_400},
            },
        )


def test_a_disabled_schedule_does_not_fire_until_enabled() -> None:
    """Catches (review 61, F6) a stand-in that armed every schedule whatever its State: a
    schedule created or updated DISABLED fired locally each minute, where AWS fires it
    only while ENABLED ("State: Specifies whether the schedule is enabled or disabled")."""
    with dev_stack() as dev:
        body: dict[str, Any] = {
            "Name": "off",
            "ScheduleExpression": "rate(1 minute)",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": TARGET,
        }
        dev.scheduler.create_schedule(**body, State="DISABLED")
        assert dev.clock.pending() == []
        dev.clock.advance(300)
        assert dev.stack.scheduler.get("off", None).fired == 0
        assert "schedule_fire" not in dev.kinds()
        dev.scheduler.update_schedule(**body, State="ENABLED")
        dev.clock.advance(120)
        assert dev.stack.scheduler.get("off", None).fired >= 1
        dev.scheduler.update_schedule(**body, State="DISABLED")
        assert dev.clock.pending() == []


def test_list_schedules_filters_by_state() -> None:
    """Catches (review 61, F5) ListSchedules' State filter ignored: every schedule answered
    where AWS lists only the ones in that state (botocore's model: ListSchedulesInput.State)."""
    with dev_stack() as dev:
        due = dev.clock.now() + 600
        for name, state in (("on", "ENABLED"), ("off", "DISABLED")):
            dev.scheduler.create_schedule(
                Name=name,
                ScheduleExpression=_at(due),
                FlexibleTimeWindow={"Mode": "OFF"},
                State=state,
                Target=TARGET,
            )

        def names(**filters: str) -> list[str]:
            return [s["Name"] for s in dev.scheduler.list_schedules(**filters)["Schedules"]]

        assert names(State="DISABLED") == ["off"]
        assert names(State="ENABLED") == ["on"]
        assert names() == ["off", "on"]
        with pytest.raises(dev.scheduler.exceptions.ValidationException, match="state"):
            dev.scheduler.list_schedules(State="PAUSED")


def test_a_client_token_outside_the_model_is_refused() -> None:
    """Catches (review 61, F7) a ClientToken dropped unread: AWS refuses one past 64
    characters or outside [a-zA-Z0-9-_] (botocore's model), on CreateSchedule as on
    DeleteSchedule, so a signer's own token that passed locally failed deployed."""
    with dev_stack() as dev:
        s, due = dev.scheduler, dev.clock.now() + 600
        call = {"ScheduleExpression": _at(due), "FlexibleTimeWindow": {"Mode": "OFF"}}
        for token in ("x" * 65, "a.b"):
            with pytest.raises(s.exceptions.ValidationException, match="clientToken"):
                s.create_schedule(Name="t", ClientToken=token, Target=TARGET, **call)
        s.create_schedule(Name="t", ClientToken="A-good_token-1", Target=TARGET, **call)
        with pytest.raises(s.exceptions.ValidationException, match="clientToken"):
            s.delete_schedule(Name="t", ClientToken="a b")
        s.delete_schedule(Name="t", ClientToken="ok")
