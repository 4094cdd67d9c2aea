"""Snooze: a task raises `pgkick.Snooze(seconds)`; its job goes back to the queue at
now + seconds, the attempt given back, with a wake-up booked, fenced like every write.
Each test names the break it catches; each break was applied by hand and seen to fail."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

import pytest

from pgkick import Snooze
from pgkick.errors import MAX_SNOOZE_SECONDS
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.loop import Worker, WorkerOptions
from tests.helpers import FakeClock, job_row, seed
from tests.spies import WAIT, CheckedRegistry, WatchedStore
from tests.store import JobStore
from tests.test_producer import RecordingKicker

LEASE = timedelta(minutes=5)
OPTIONS = WorkerOptions(batch=10, lease=LEASE, max_fanout=0, heartbeat=False)


def forever() -> int:
    return 600_000


@pytest.fixture
def timed(dsn: str, clock: FakeClock) -> Iterator[JobStore]:
    with JobStore.open(dsn, clock) as opened:
        yield opened


def test_a_snoozed_job_comes_back_at_its_time_with_its_attempt_and_a_wake_up(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """A job with one attempt snoozes twice, then succeeds. Catches: a snooze that uses
    an attempt (the third run would be attempt 3 of 1: the claim breaks the attempts
    constraint, or the job fails), a wrong run_at (due at once: the second drain runs it
    again before its time), and no wake-up booked (nothing would run it: no poller)."""
    runs: list[int] = []
    tasks = Registry()

    @tasks.task("later")
    def later(payload: Any, job: JobContext) -> str:
        runs.append(job.attempt)
        if len(runs) < 3:
            raise Snooze(30)
        return "ok"

    (job_id,) = seed(timed, 1, task="later", max_attempts=1)
    kicker = RecordingKicker()
    first = Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["run_at"]) == (
        "queued",
        0,
        clock.now + timedelta(seconds=30),
    )
    assert row["last_error"] is None and row["locked_until"] is None
    # the snooze's wake-up, and the same one again from the sweep as the worker leaves
    # (pgkick.worker.healing); a kicker books one schedule per queue and minute
    assert {(queue, when.astimezone(UTC)) for queue, when in kicker.wakes} == {
        ("default", clock.now + timedelta(seconds=30))
    }
    assert (first.snoozed, first.retried, first.failed, first.done) == (1, 0, 0, 0)

    clock.advance(29)
    assert Worker(timed, tasks, kicker, OPTIONS).drain("default", forever).claimed == 0
    clock.advance(1)
    Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)  # snoozes again
    clock.advance(30)
    last = Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)
    assert runs == [1, 1, 1]
    assert last.done == 1
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["result"]) == ("done", 1, "ok")


def test_a_snooze_after_the_lease_was_taken_over_writes_nothing(
    dsn: str, clock: FakeClock, checked_tasks: CheckedRegistry
) -> None:
    """The task stalls past its lease, another worker takes the job, then the task
    snoozes. Catches: an unfenced snooze (it would re-queue the new owner's running job
    and give back an attempt it does not hold)."""
    taken: dict[str, Any] = {}

    @checked_tasks.task("stalls")
    def stalls(payload: Any, job: JobContext) -> None:
        clock.advance(LEASE.total_seconds() + 1)
        with JobStore.open(dsn, clock) as other:
            other.reap_expired()
            other.claim("default", batch=1, lease=LEASE)
        taken.update(job_row(dsn, job.id))
        raise Snooze(10)

    with WatchedStore.open(dsn, clock) as watched:
        (job_id,) = seed(watched, 1, task="stalls")
        kicker = RecordingKicker()
        summary = Worker(watched, checked_tasks, kicker, OPTIONS).drain("default", forever)
    checked_tasks.reraise()
    assert (taken["status"], taken["attempts"]) == ("running", 2)
    assert job_row(dsn, job_id) == taken
    assert (summary.lost, summary.snoozed) == (1, 0) and kicker.wakes == []


def test_forget_waits_for_an_extension_in_flight(dsn: str, clock: FakeClock) -> None:
    """A snooze gives the attempt back, so the next claim reuses the fencing token: the
    keeper must not send an extension naming the job after `forget` returns. The
    heartbeat is parked inside its extension; `forget` must wait for it. Catches:
    `forget` returning at once (a plain release), leaving the extension in flight."""
    with WatchedStore.open(dsn, clock) as watched:
        seed(watched, 1)
        jobs = watched.claim("default", batch=1, lease=LEASE)
        keeper = LeaseKeeper(watched, LEASE, interval=0.01)
        keeper.hold(jobs)
        watched.park_heartbeat()  # the keeper's thread now waits inside extend_many
        forgotten = threading.Event()
        thread = threading.Thread(target=lambda: (keeper.forget(jobs[0].id), forgotten.set()))
        thread.start()
        # Not a sleep for ordering: forget must still be blocked after this long a look.
        assert not forgotten.wait(0.2)
        extensions = watched.extensions
        watched.release_heartbeat()
        assert forgotten.wait(WAIT)
        assert watched.extensions == extensions + 1  # the parked one finished first
        keeper.close()
        thread.join(WAIT)


@pytest.mark.parametrize(
    ("seconds", "error", "message"),
    [
        (0, ValueError, "must be above 0"),
        (-5, ValueError, "must be above 0"),
        (float("nan"), ValueError, "must be above 0"),
        (float("inf"), ValueError, f"at most {MAX_SNOOZE_SECONDS}"),
        (MAX_SNOOZE_SECONDS + 1, ValueError, f"at most {MAX_SNOOZE_SECONDS}"),
        ("60", TypeError, "must be a number, got str"),
        (True, TypeError, "must be a number, got bool"),
    ],
)
def test_bad_snooze_seconds_are_refused_in_the_task(
    seconds: Any, error: type[Exception], message: str
) -> None:
    """Catches: a snooze of 0 or less (a job that spins without ever using an attempt),
    of NaN or a huge number (an interval PostgreSQL refuses mid-batch), of a string."""
    with pytest.raises(error, match=message):
        Snooze(seconds)


def test_a_bad_snooze_is_an_ordinary_failure_naming_the_problem(dsn: str, timed: JobStore) -> None:
    """Catches: a bad Snooze crashing the worker instead of failing the one job."""
    tasks = Registry()

    @tasks.task("bad")
    def bad(payload: Any) -> None:
        raise Snooze(-1)

    (job_id,) = seed(timed, 1, task="bad")
    summary = Worker(timed, tasks, NoKicker(), OPTIONS).drain("default", forever)
    assert summary.retried == 1
    assert "InvalidArgument: Snooze: seconds must be above 0" in str(
        job_row(dsn, job_id)["last_error"]
    )
