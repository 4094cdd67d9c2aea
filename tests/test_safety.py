"""Safety wake-ups (pgkick.kick.safety, issue #30): a kick that Lambda accepts and then loses,
and the heal kick sent for it that is lost too, still get the job run, without the reaper.

The dev stack's Lambda queue drops events on request (`drop_rate`, silently, as AWS may)
and its Scheduler is as strict as AWS's (at() in the past refused, fired within the minute);
its clock is a ManualClock set to the real time, so the schedules the Lambda kicker books
a minute ahead are accepted, and the test moves the clock instead of waiting the minute.
Every call goes through boto3 over HTTP; the job runs in the stack's execution environment
(the real handler under Lambda's runtime). Before the safety wake-up, nothing was booked
when a kick was sent, and this job stayed queued until the daily reaper."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from pgkick.kick.kickers import first_minute
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.producer import enqueue as producer
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.devserver_fixtures import FUNCTION, Running, dev_stack
from tests.helpers import FakeClock, seed
from tests.store import JobStore

ARN = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
ROLE = "arn:aws:iam::123456789012:role/pgkick-scheduler"
SAFETY = timedelta(seconds=60)


def kicker_for(dev: Running) -> LambdaKicker:
    """The Lambda kicker a producer or a worker uses, against the stack over HTTP."""
    return LambdaKicker(
        FUNCTION,
        function_arn=ARN,
        scheduler_role_arn=ROLE,
        lambda_client=dev.lambda_,
        scheduler_client=dev.scheduler,
    )


def created(dev: Running) -> list[str]:
    """The wake-ups booked (a worker's own rescue, booked and cancelled, left out)."""
    return [e["detail"] for e in dev.events("schedule_create") if "rescue" not in e["detail"]]


@pytest.fixture(autouse=True)
def safety_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite runs with no safety wake-ups (tests/conftest.py): here they are the subject."""
    monkeypatch.setenv("PGKICK_KICK_SAFETY_MS", str(int(SAFETY.total_seconds() * 1000)))


def test_a_dropped_kick_and_its_dropped_heal_are_run_by_the_safety_wake_up(dsn: str) -> None:
    start = float(int(time.time()))
    env = {
        "DATABASE_URL": dsn,
        "PGKICK_TASKS": "pgkick_dev.tasks",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "PGKICK_WORKER_LINGER_MS": "0",
    }
    with dev_stack("pgkick.aws.worker:handler", env=env, start=start) as dev:
        lost = dev.stack.functions[FUNCTION]
        lost.options.drop_rate = 1.0  # Lambda answers 202, and never runs the event
        app = kicker_for(dev)
        job = producer.enqueue_and_kick({}, task="noop", queue="a", dsn=dsn, kicker=app)
        assert app.flush(10)
        # Later traffic: a worker leaves queue b after a's pending kick lapsed (the SQL's
        # clock 30 s on): its sweep kicks a, and that heal kick is lost as well.
        clock = FakeClock(datetime.now(UTC) + timedelta(seconds=30))
        with JobStore.open(dsn, clock) as store:
            seed(store, 1, queue="b")
            tasks = Registry()
            tasks.task("noop")(lambda payload: None)
            healer = kicker_for(dev)
            options = WorkerOptions(heartbeat=False, kick_safety=SAFETY)
            summary = Worker(store, tasks, healer, options).drain("b", lambda: 600_000)
            assert (summary.done, summary.healed_kicks) == (1, 1)
            assert healer.flush(10)
            assert lost.stats.injected_drops == 2  # the enqueue's kick and the heal kick
            assert store.get_many([job])[0]["status"] == "queued"
        # Only the safety wake-ups are left: a minute and a margin after each kick, in one
        # or two schedules (the same minute is booked once).
        assert 1 <= len(created(dev)) <= 2
        lost.options.drop_rate = 0.0
        dev.clock.advance(3 * 60)  # past the safety's minute: Scheduler fires it
        dev.wait(lambda: lost.stats.invocations >= 1 and lost.idle(), timeout=60)
        with JobStore.open(dsn) as store:
            row = store.get_many([job])[0]
        assert (row["status"], row["attempts"]) == ("done", 1)  # no reaper: none runs here


def test_a_kick_whose_minute_is_booked_already_makes_no_scheduler_call(dsn: str) -> None:
    """The safety is an ordinary wake-up of its queue and minute: when that minute is booked
    already (a delayed job due then), the kick adds no call."""
    with dev_stack(start=float(int(time.time()))) as dev:
        app = kicker_for(dev)
        due = first_minute(datetime.now(UTC) + SAFETY)  # the minute a kick's safety takes
        producer.enqueue_many(
            [{"payload": {}, "task": "noop", "queue": "a", "run_at": due}], dsn=dsn, kicker=app
        )
        assert app.flush(10)
        booked = app.wakes.stats.calls
        assert booked == 2  # its wake-up at `due`, and that wake-up's own safety a minute on
        producer.enqueue_and_kick({}, task="noop", queue="a", dsn=dsn, kicker=app)
        assert app.flush(10)
        assert dev.stack.functions[FUNCTION].stats.events == 1  # the kick was sent
        assert app.wakes.stats.calls == booked  # and no Scheduler call for its safety
        assert len(created(dev)) == booked


def test_the_test_kit_books_no_safety_for_its_in_process_kicks(dsn: str) -> None:
    """pgkick.testing's kicks run in the test's own process and are never lost: its `wakes`
    stay the later jobs' own, as an app's tests assert them, with the safety on."""
    from pgkick import testing

    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    with testing.inline(dsn, tasks=tasks) as jobs:
        producer.enqueue_and_kick({}, task="noop", dsn=dsn)
        producer.enqueue_and_kick({}, task="noop", dsn=dsn, delay=3600)
    assert jobs.kicks == ["default"]
    assert [queue for queue, _when in jobs.wakes] == ["default"]  # the delayed job's alone


class DiesInItsKick:
    """A kicker whose process is killed while its kick is in flight (an app's Lambda timing
    out during a kick that hangs): what it noted before is what survives."""

    def __init__(self) -> None:
        self.wakes: list[tuple[str, datetime]] = []

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        raise SystemExit("killed during the kick")

    def wake_at(self, queue: str, when: datetime) -> None:
        self.wakes.append((queue, when))


def test_a_sender_killed_during_its_kick_leaves_the_safety_booked(dsn: str) -> None:
    """Catches (review 60, F1) the safety booked only after the kick returned: a producer
    killed during its kick left its reservation, which silenced every other producer for
    PGKICK_KICK_PENDING_MS, and nothing booked; the queue's jobs waited for later traffic or
    the daily reaper. The safety is noted first (the kicker's thread books it while the
    kick is in flight), by a producer and by every other sender (kick_with_safety)."""
    from pgkick.kick.safety import kick_with_safety

    producer_side = DiesInItsKick()
    with pytest.raises(SystemExit):
        producer.enqueue_and_kick({}, task="noop", queue="a", dsn=dsn, kicker=producer_side)
    assert [queue for queue, _ in producer_side.wakes] == ["a"]
    sender = DiesInItsKick()
    now = datetime.now(UTC)
    with pytest.raises(SystemExit):
        kick_with_safety(sender, "b", "heal", after=SAFETY, now=now)
    assert sender.wakes == [("b", now + SAFETY)]


def test_a_refusal_quoting_the_session_token_is_logged_without_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Catches the boto3 path (outside Lambda: botocore's ClientError) logging AWS's
    InvalidSignatureException whole: it quotes the canonical request it expected, the
    x-amz-security-token header's value with it, and the token signs for hours."""
    from botocore.exceptions import ClientError

    from pgkick.kick.safety import wake_after_failed_kick

    token = "IQoJb3JpZ2luX2VjEXAMPLETOKEN"
    monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    said = f"The canonical request ... x-amz-security-token:{token}\nhost:scheduler ..."

    class Refused:
        def wake_at(self, queue: str, when: datetime) -> None:
            error = {"Code": "InvalidSignatureException", "Message": said}
            raise ClientError({"Error": error}, "CreateSchedule")

    with caplog.at_level("WARNING", logger="pgkick"):
        assert wake_after_failed_kick(Refused(), "q", after=timedelta(0)) is False  # type: ignore[arg-type]
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "InvalidSignatureException" in logged and token not in logged
