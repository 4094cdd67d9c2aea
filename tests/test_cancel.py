"""Cancelling a running job: `pgkick cancel` marks it, the worker's heartbeat reads the mark
back from its lease extension and sets the task's `cancelled` event, and the job ends failed
'cancelled by operator' once the task stops, through the same fenced write as any failure.

A real worker drains in a thread with its heartbeat on (a 0.3 s lease: a tick every 0.1 s
of real time); the SQL sees a FakeClock, so no lease runs out unless a test moves it.
Tasks wait on events, never on sleeps. Each test names the break it catches; each break
was applied by hand and seen to fail.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from pgkick.cli.main import main
from pgkick.errors import Continuation, Snooze
from pgkick.kick.kickers import NoKicker
from pgkick.producer.enqueue import Enqueuer
from pgkick.tasks.context import JobContext
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.loop import Summary, Worker, WorkerOptions
from tests.helpers import FakeClock, job_row, seed
from tests.spies import WAIT, CheckedRegistry, WatchedStore
from tests.store import JobStore
from tests.test_producer import RecordingKicker

SHORT = timedelta(seconds=0.3)  # the heartbeat ticks every 0.1 s
OPTIONS = WorkerOptions(batch=1, lease=SHORT, max_fanout=0, heartbeat=True)


@pytest.fixture(autouse=True)
def no_kicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)


def forever() -> int:
    return 600_000


@pytest.fixture
def watched(dsn: str, clock: FakeClock) -> Iterator[WatchedStore]:
    with WatchedStore.open(dsn, clock) as opened:
        yield opened


def drain_in_thread(store: JobStore, tasks: CheckedRegistry) -> tuple[threading.Thread, Summary]:
    summary = Summary(queue="default")

    def run() -> None:
        got = Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)
        for name, value in got.as_dict().items():
            setattr(summary, name, value)

    thread = threading.Thread(target=run, name="test-worker")
    thread.start()
    return thread, summary


def cancel(capsys: pytest.CaptureFixture[str], dsn: str, job_id: int) -> str:
    capsys.readouterr()
    assert main(["cancel", str(job_id), "--dsn", dsn, "--json"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("ending", ["returns", "raises"])
def test_the_heartbeat_tells_a_running_task_it_was_cancelled_and_the_job_ends_failed(
    dsn: str,
    watched: WatchedStore,
    checked_tasks: CheckedRegistry,
    capsys: pytest.CaptureFixture[str],
    ending: str,
) -> None:
    """The task starts, the operator runs `pgkick cancel`, the task waits for `cancelled`,
    then returns a value (or raises a retryable error). Catches: the extension not reading
    the mark back (or the keeper not setting the event): the task's wait times out and the
    job ends done (or queued for a retry); the worker ignoring a set event: the same; a
    cancel that does not mark running jobs: `cancelling` is empty."""
    started = threading.Event()
    seen: list[bool] = []

    @checked_tasks.task("long")
    def long(payload: Any, job: JobContext) -> dict[str, bool]:
        started.set()
        seen.append(job.cancelled.wait(WAIT))
        if ending == "raises":
            raise RuntimeError("interrupted")  # would be retried, were it not cancelled
        return {"partial": True}

    (job_id,) = seed(watched, 1, task="long", max_attempts=5)
    thread, summary = drain_in_thread(watched, checked_tasks)
    assert started.wait(WAIT)
    out = cancel(capsys, dsn, job_id)
    thread.join(WAIT)
    assert not thread.is_alive()
    checked_tasks.reraise()

    assert f'"cancelling": [{job_id}]' in out and '"cancelled": []' in out
    assert seen == [True]
    row = job_row(dsn, job_id)
    assert (row["status"], row["last_error"], row["attempts"]) == (
        "failed",
        "cancelled by operator",
        1,
    )
    assert row["result"] is None and row["finished_at"] is not None
    assert (summary.failed, summary.done, summary.retried, summary.lost) == (1, 0, 0, 0)


def test_a_cancelled_job_whose_lease_was_lost_is_not_written_by_the_worker(
    dsn: str, clock: FakeClock, watched: WatchedStore, checked_tasks: CheckedRegistry
) -> None:
    """The heartbeat is parked, the operator cancels, the lease runs out and the reaper
    takes the job: a cancelled job is failed by the reaper, not re-queued. The heartbeat
    is let go; its extension finds the job gone. Catches: the reaper re-queueing a job
    an operator cancelled (it would run again), and a worker that writes for a cancelled
    job it no longer holds (`job_fail` naming it: the fence skipped for cancels)."""
    taken: dict[str, Any] = {}
    seen: list[bool] = []

    @checked_tasks.task("stalls")
    def stalls(payload: Any, job: JobContext) -> None:
        watched.park_heartbeat()
        with JobStore.open(dsn, clock) as operator:
            assert [i for i, _ in operator.cancel_running(ids=[job.id], queue=None, task=None)]
            clock.advance(SHORT.total_seconds() + 1)
            assert [r.status for r in operator.reap_expired()] == ["failed"]
        taken.update(job_row(dsn, job.id))
        watched.release_heartbeat()
        seen.append(job.lease_lost.wait(WAIT))

    (job_id,) = seed(watched, 1, task="stalls")
    summary = Worker(watched, checked_tasks, NoKicker(), OPTIONS).drain("default", forever)
    checked_tasks.reraise()
    assert seen == [True]
    assert (taken["status"], taken["last_error"]) == ("failed", "cancelled by operator")
    assert watched.writes_for(job_id) == []
    assert job_row(dsn, job_id) == taken
    assert (summary.lost, summary.failed, summary.done) == (1, 0, 0)


def test_a_task_asking_for_an_extension_learns_of_the_cancel(
    dsn: str, clock: FakeClock, store: JobStore
) -> None:
    """The keeper alone, no heartbeat thread: the task's own `extend_lease` reads the mark.
    Catches: `LeaseKeeper.extend` dropping the cancel flag of its statement."""
    with JobStore.open(dsn, clock) as worker:
        seed(worker, 2)
        jobs = worker.claim("default", batch=2, lease=SHORT)
        keeper = LeaseKeeper(worker, SHORT, interval=None)
        keeper.hold(jobs)
        store.cancel_running(ids=[jobs[0].id], queue=None, task=None)
        assert keeper.extend(jobs[0]) is True  # still held: cancelling is not losing
        assert keeper.is_cancelled(jobs[0].id) and not keeper.is_lost(jobs[0].id)
        keeper.tick()
        assert not keeper.is_cancelled(jobs[1].id)


def test_retrying_a_job_cancelled_while_running_clears_the_mark(
    dsn: str, store: JobStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches: `pgkick retry` keeping the cancel mark, so the retried job would be
    cancelled again by its first heartbeat."""
    (job_id,) = seed(store, 1)
    (job,) = store.claim("default", batch=1, lease=SHORT)
    store.cancel_running(ids=[job_id], queue=None, task=None)
    store.fail(job_id, job.attempts, "cancelled by operator", permanent=True)
    assert main(["retry", str(job_id), "--dsn", dsn]) == 0
    (again,) = store.claim("default", batch=1, lease=SHORT)
    assert store.extend_many([again], SHORT) == {job_id: False}


@pytest.mark.parametrize("ending", ["raise", "snooze"])
def test_a_cancel_after_the_last_heartbeat_fails_a_raising_or_snoozing_job(
    dsn: str, clock: FakeClock, ending: str
) -> None:
    """No heartbeat runs (the cancel lands after the last one): the operator cancels while
    the task runs, then the task raises a retryable error or snoozes. Catches: job_fail
    or job_snooze ignoring the mark, so a cancelled job is queued again (a retry or a
    snooze) and runs once more, with a wake-up booked for it."""
    tasks = CheckedRegistry()

    @tasks.task("interrupted")
    def interrupted(payload: Any, job: JobContext) -> None:
        with JobStore.open(dsn, clock) as operator:
            assert operator.cancel_running(ids=[job.id], queue=None, task=None)
        assert not job.cancelled.is_set()  # no heartbeat told the task
        if ending == "snooze":
            raise Snooze(60)
        raise RuntimeError("SMTP 451: try again later")

    kicker = RecordingKicker()
    with JobStore.open(dsn, clock) as store:
        (job_id,) = seed(store, 1, task="interrupted")
        options = WorkerOptions(batch=1, lease=timedelta(minutes=5), max_fanout=0, heartbeat=False)
        summary = Worker(store, tasks, kicker, options).drain("default", forever)
    assert (summary.failed, summary.retried, summary.snoozed) == (1, 0, 0)
    row = job_row(dsn, job_id)
    assert (row["status"], row["last_error"], row["attempts"]) == (
        "failed",
        "cancelled by operator",
        1,
    )
    assert kicker.wakes == []


@pytest.mark.parametrize("ending", ["snooze", "continuation"])
def test_a_late_cancel_of_a_snooze_or_continuation_kicks_the_run_anyway_dependants(
    dsn: str, clock: FakeClock, ending: str
) -> None:
    """The cancel lands after the last heartbeat, then the task snoozes or continues: the job
    fails instead, and its "run anyway" dependant enters its queue in that statement.
    Catches (note 59) the worker counting the failure without kicking that queue, as it
    kicks a failure's (the dependant waited for a leaving worker's sweep or the reaper)."""
    tasks = CheckedRegistry()

    @tasks.task("interrupted")
    def interrupted(payload: Any, job: JobContext) -> None:
        with JobStore.open(dsn, clock) as operator:
            assert operator.cancel_running(ids=[job.id], queue=None, task=None)
        if ending == "snooze":
            raise Snooze(60)
        raise Continuation(stalled=False)

    kicker = RecordingKicker()
    with JobStore.open(dsn, clock) as store:
        enqueue = Enqueuer(store).enqueue
        parent = enqueue({}, task="interrupted")
        anyway = enqueue({}, task="noop", queue="held", after=[(parent, "run anyway")])
        options = WorkerOptions(batch=1, lease=timedelta(minutes=5), max_fanout=0, heartbeat=False)
        summary = Worker(store, tasks, kicker, options).drain("default", forever)
    assert (summary.failed, summary.snoozed, summary.continued) == (1, 0, 0)
    assert job_row(dsn, parent)["last_error"] == "cancelled by operator"
    assert job_row(dsn, anyway)["status"] == "queued"
    assert [k[:2] for k in kicker.kicks] == [("held", "dependants")]
