"""Leases under a moved clock: the heartbeat keeps a long job, a lost lease is noticed and
nothing is written for it. Each test names the break it catches (each was applied by hand
and seen to fail). Assertions are made after the drain, on what the tasks recorded: the
worker turns an exception inside a task into a job failure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgkick.kick.kickers import NoKicker
from pgkick.store.worker import ClaimedJob
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.reaper import reap
from pgkick.worker.task_run import TaskOutcome, run_task
from tests.helpers import FakeClock, Ticks, job_row, seed
from tests.spies import WAIT, CheckedRegistry, WatchedStore
from tests.store import JobStore

LEASE = timedelta(seconds=60)
# A worker's heartbeat ticks every third of its lease in real seconds: 0.1 s here. The SQL
# sees the FakeClock, which the tasks move by fractions of this lease.
SHORT = timedelta(seconds=0.3)


def forever() -> int:
    return 600_000


def options(lease: timedelta, *, heartbeat: bool) -> WorkerOptions:
    return WorkerOptions(batch=1, lease=lease, max_fanout=0, heartbeat=heartbeat)


def locked_until(dsn: str, ids: list[int]) -> dict[int, datetime]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, locked_until FROM pgkick.jobs WHERE id = ANY(%s)", (ids,))
        return dict(rows.fetchall())


@pytest.fixture
def watched(dsn: str, clock: FakeClock) -> Iterator[WatchedStore]:
    with WatchedStore.open(dsn, clock) as opened:
        yield opened


def test_a_tick_moves_locked_until_and_the_reaper_spares_a_job_past_its_original_lease(
    dsn: str, clock: FakeClock
) -> None:
    """Catches: the batch extension does nothing and reports success (`JobStore.extend_many`
    returning every id without updating, or `LeaseKeeper.tick` returning at once): the
    leases stay at their claim-time expiry and the reaper takes both jobs at +70 s."""
    with JobStore.open(dsn, clock) as worker, JobStore.open(dsn, clock) as reaper:
        ids = seed(worker, 2)
        jobs = worker.claim("default", batch=2, lease=LEASE)  # leases end at +60 s
        keeper = LeaseKeeper(worker, LEASE, interval=None)
        keeper.hold(jobs)

        clock.advance(40)
        keeper.tick()
        assert locked_until(dsn, ids) == dict.fromkeys(ids, clock.now + LEASE)  # +100 s

        clock.advance(30)  # +70 s: past the original lease, inside the extended one
        assert reaper.reap_expired() == []
        assert [job_row(dsn, i)["status"] for i in ids] == ["running", "running"]
        assert not any(keeper.is_lost(i) for i in ids)

        clock.advance(31)  # +101 s: past the extended lease too; the same reaper acts now
        assert sorted(job.id for job in reaper.reap_expired()) == sorted(ids)


def test_a_job_longer_than_its_lease_keeps_it_while_the_heartbeat_runs(
    dsn: str, clock: FakeClock, watched: WatchedStore, checked_tasks: CheckedRegistry
) -> None:
    """End to end: a 0.3 s lease, a task that runs 3.5 leases, the reaper run against the
    moved clock after every heartbeat. Catches: the heartbeat extending nothing (the
    batch extension a no-op reporting success, or `tick` doing nothing): the reaper
    re-queues the job at its first run past the original lease and it ends at attempt 2."""
    reports: list[dict[str, Any]] = []
    started = clock.now

    @checked_tasks.task("long")
    def long(payload: Any, job: JobContext) -> None:
        if job.attempt > 1:  # run again only if the lease was lost: end the broken run fast
            return
        with JobStore.open(dsn, clock) as other:
            for _ in range(5):
                watched.wait_extensions(2)  # the heartbeat extended at today's clock
                clock.advance(SHORT.total_seconds() * 0.7)
                reports.append(reap(other, NoKicker(), retention=timedelta(days=7)))

    (job_id,) = seed(watched, 1, task="long")
    summary = Worker(watched, checked_tasks, NoKicker(), options(SHORT, heartbeat=True)).drain(
        "default", forever
    )
    checked_tasks.reraise()
    assert clock.now - started > 3 * SHORT  # the job outlived three leases
    assert [(r["requeued"], r["failed"]) for r in reports] == [(0, 0)] * 5
    assert (summary.claimed, summary.done, summary.lost) == (1, 1, 0)
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"]) == ("done", 1)


def two_held_jobs(
    worker: JobStore, clock: FakeClock
) -> tuple[int, int, list[ClaimedJob], LeaseKeeper]:
    """Jobs A and B claimed 30 s apart (leases end at +60 s and +90 s), held by a keeper
    that ticks only when told."""
    (a,) = seed(worker, 1)
    held = worker.claim("default", batch=1, lease=LEASE)
    clock.advance(30)
    (b,) = seed(worker, 1)
    held += worker.claim("default", batch=1, lease=LEASE)
    keeper = LeaseKeeper(worker, LEASE, interval=None)
    keeper.hold(held)
    return a, b, held, keeper


def a_taken_over(
    worker: JobStore, other: JobStore, clock: FakeClock
) -> tuple[int, int, list[ClaimedJob], LeaseKeeper]:
    """two_held_jobs, then +61 s: A's lease ran out and `other` reaped and claimed it; B's
    lease still runs."""
    a, b, held, keeper = two_held_jobs(worker, clock)
    clock.advance(31)
    assert [job.id for job in other.reap_expired()] == [a]
    assert [job.id for job in other.claim("default", batch=1, lease=LEASE)] == [a]
    return a, b, held, keeper


def test_a_tick_marks_a_taken_over_job_lost_and_keeps_the_others(
    dsn: str, clock: FakeClock
) -> None:
    """The keeper alone: job A's lease ran out and another worker holds it now; job B's
    is still live. Catches: `LeaseKeeper.is_lost` always False, or the `lease_lost`
    event (the one the task holds) never set, when an extension updates no row; and a
    keeper whose extension touches the new owner's row."""
    with JobStore.open(dsn, clock) as worker, JobStore.open(dsn, clock) as other:
        a, b, _held, keeper = two_held_jobs(worker, clock)
        a_lost, b_lost = keeper.lost_event(a), keeper.lost_event(b)  # what the tasks hold

        clock.advance(31)  # +61 s: A expired, B did not
        assert [job.id for job in other.reap_expired()] == [a]
        assert [job.attempts for job in other.claim("default", batch=1, lease=LEASE)] == [2]
        new_owners_row = job_row(dsn, a)

        keeper.tick()
        assert keeper.is_lost(a) and a_lost.is_set()
        assert not keeper.is_lost(b) and not b_lost.is_set()
        assert job_row(dsn, a) == new_owners_row
        assert locked_until(dsn, [b]) == {b: clock.now + LEASE}


def test_a_lease_its_extensions_cannot_reach_is_marked_lost_once_it_has_run_out(
    dsn: str, clock: FakeClock
) -> None:
    """The worker's session dies (pg_terminate_backend, a network cut) while its job runs:
    every extension raises. Catches: a failed extension only logged, as it was (a review,
    2026-12-05, F4): the lease ran out unextended, the reaper handed the job to another
    worker, and this one's task ran on beside it with `lease_lost` never set. Marked lost
    only once the lease has run out by the keeper's own clock: a fault that heals in time
    loses nothing."""
    ticks = Ticks()
    with JobStore.open(dsn, clock) as worker:
        (job_id,) = seed(worker, 1)
        keeper = LeaseKeeper(worker, LEASE, interval=None)
        keeper.monotonic = ticks
        keeper.hold(worker.claim("default", batch=1, lease=LEASE))  # runs out at +60 s
        lost = keeper.lost_event(job_id)  # what the task holds
        worker.conn.close()  # every statement of the keeper fails from now on

        ticks.now += 59
        with pytest.raises(psycopg.OperationalError):
            keeper.tick()
        assert not keeper.is_lost(job_id) and not lost.is_set()  # it may come back in time

        ticks.now += 1  # +60 s: the lease is over, another worker may hold the job now
        with pytest.raises(psycopg.OperationalError):
            keeper.check_cancels()
        assert keeper.is_lost(job_id) and lost.is_set()
    assert job_row(dsn, job_id)["status"] == "running"  # nothing written: the reaper's now


def test_a_job_whose_failure_is_recorded_during_an_extension_is_not_reported_lost(
    dsn: str, clock: FakeClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat takes its list of held jobs, and while its extension is on its way the
    worker records job B's failure (queued for its retry) and releases it: the extension
    then finds B no longer running under this attempt. That is no lost lease (seen as a
    "lease lost" warning after retries in the chaos runs' logs); job A, taken over by
    another worker while still held, is. Catches a keeper that warns for a job released
    meanwhile, or that stops warning for one really lost."""
    with JobStore.open(dsn, clock) as worker, JobStore.open(dsn, clock) as other:
        a, b, held, keeper = a_taken_over(worker, other, clock)
        extend_many = worker.extend_many

        def outcome_first(jobs: list[ClaimedJob], lease: timedelta) -> Any:
            assert worker.fail(b, held[1].attempts, "boom").owned  # the worker's thread
            keeper.release(b)
            return extend_many(jobs, lease)

        monkeypatch.setattr(worker, "extend_many", outcome_first)
        with caplog.at_level("WARNING", logger="pgkick.lease"):
            keeper.tick()
        assert [r.getMessage() for r in caplog.records] == [
            f"lease lost: job {a} now belongs to another attempt"
        ]
        assert keeper.is_lost(a)
        assert job_row(dsn, b)["status"] == "queued"


def test_a_late_extension_does_not_mark_the_next_attempt_of_its_job_lost(
    dsn: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat shares the worker's connection and can wait behind its statements:
    while its extension of job B's attempt 1 waits, the worker records B's failure, and
    once the retry is due claims B again (attempt 2) and holds it. The extension, fenced by
    attempt 1, then finds B gone. Attempt 2 is not lost: marked so, the worker would write
    nothing for it and B would run a third time after its lease. Catches a keeper that
    marks by job id whatever attempt it holds (a retry storm's job seen at a 4th attempt
    once in a loaded run)."""
    with JobStore.open(dsn, clock) as worker, JobStore.open(dsn, clock) as other:
        a, b, held, keeper = a_taken_over(worker, other, clock)
        extend_many = worker.extend_many
        again: list[ClaimedJob] = []

        def worker_first(jobs: list[ClaimedJob], lease: timedelta) -> Any:
            failed = worker.fail(b, held[1].attempts, "boom", backoff=timedelta(seconds=1))
            assert failed.owned and failed.run_at is not None
            keeper.release(b)
            clock.now = failed.run_at
            again.extend(worker.claim("default", batch=1, lease=LEASE))
            keeper.hold(again)
            return extend_many(jobs, lease)

        monkeypatch.setattr(worker, "extend_many", worker_first)
        keeper.tick()
        assert [(job.id, job.attempts) for job in again] == [(b, 2)]
        assert keeper.is_lost(a)
        assert not keeper.is_lost(b) and not keeper.lost_event(b).is_set()
        assert keeper.extend(again[0])  # attempt 2's lease is its own


def test_flags_asked_for_after_the_marks_are_already_set_and_a_job_held_again_starts_clean(
    dsn: str, clock: FakeClock, store: JobStore
) -> None:
    """The keeper makes a job's events only when asked. Catches: an event made after the
    tick that marked its job lost (or cancelled) coming back unset (a task that asks late
    would never be told); and `hold` keeping an old mark when the same job is held again
    (a snoozed job claimed anew would be abandoned as lost at once)."""
    with JobStore.open(dsn, clock) as worker, JobStore.open(dsn, clock) as other:
        a, b, held, keeper = two_held_jobs(worker, clock)
        store.cancel_running(ids=[b], queue=None, task=None)
        clock.advance(31)
        assert [job.id for job in other.reap_expired()] == [a]
        keeper.tick()  # A: no row updated, lost; B: still ours, cancel requested

        assert keeper.is_lost(a) and keeper.lost_event(a).is_set()
        assert not keeper.cancelled_event(a).is_set()
        assert keeper.is_cancelled(b) and keeper.cancelled_event(b).is_set()
        assert not keeper.is_lost(b) and not keeper.lost_event(b).is_set()

        keeper.hold([held[0]])  # the same id held again (as after a snooze and a new claim)
        assert not keeper.is_lost(a) and not keeper.lost_event(a).is_set()


def test_a_task_that_extends_after_a_takeover_learns_it_lost_and_nothing_is_written(
    dsn: str, clock: FakeClock, watched: WatchedStore, checked_tasks: CheckedRegistry
) -> None:
    """The task stalls past its lease, another worker takes the job over, the task asks
    for an extension, then raises. What it saw is recorded here and checked after the
    drain. Catches: `is_lost` always False (the worker sends `job_fail` for a job that is
    not its own), or the `lease_lost` event never set (the task is never told)."""
    seen: list[tuple[bool, bool]] = []
    taken_over: dict[str, Any] = {}

    @checked_tasks.task("stalls")
    def stalls(payload: Any, job: JobContext) -> None:
        clock.advance(LEASE.total_seconds() + 1)
        with JobStore.open(dsn, clock) as other:
            other.reap_expired()
            other.claim("default", batch=1, lease=LEASE)
        taken_over.update(job_row(dsn, job.id))
        seen.append((job.extend_lease(), job.lease_lost.is_set()))
        raise RuntimeError("would record a failure if it still held the job")

    (job_id,) = seed(watched, 1, task="stalls")
    summary = Worker(watched, checked_tasks, NoKicker(), options(LEASE, heartbeat=False)).drain(
        "default", forever
    )
    checked_tasks.reraise()
    assert seen == [(False, True)]  # the extension found the job gone, and said so
    assert taken_over["attempts"] == 2 and taken_over["status"] == "running"
    assert watched.writes_for(job_id) == []  # no fail, no complete: not a single statement
    assert job_row(dsn, job_id) == taken_over
    assert (summary.lost, summary.done, summary.failed, summary.retried) == (1, 0, 0, 0)


def test_the_heartbeat_tells_a_running_task_its_lease_is_lost_and_nothing_is_written(
    dsn: str, clock: FakeClock, watched: WatchedStore, checked_tasks: CheckedRegistry
) -> None:
    """The heartbeat is held while the task stalls past its lease and another worker takes
    the job over, then let go; the task waits for `lease_lost` and returns normally.
    Catches: `is_lost` always False (the worker completes a job that is not its own:
    `job_complete_many` names it), or `lease_lost` never set (the task waits in vain)."""
    seen: list[bool] = []
    taken_over: dict[str, Any] = {}

    @checked_tasks.task("stalls")
    def stalls(payload: Any, job: JobContext) -> None:
        watched.park_heartbeat()  # no extension in flight while the lease runs out
        clock.advance(SHORT.total_seconds() + 1)
        with JobStore.open(dsn, clock) as other:
            other.reap_expired()
            other.claim("default", batch=1, lease=LEASE)
        taken_over.update(job_row(dsn, job.id))
        watched.release_heartbeat()  # its next extension finds the job gone
        seen.append(job.lease_lost.wait(WAIT))

    (job_id,) = seed(watched, 1, task="stalls")
    summary = Worker(watched, checked_tasks, NoKicker(), options(SHORT, heartbeat=True)).drain(
        "default", forever
    )
    checked_tasks.reraise()
    assert seen == [True]
    assert taken_over["attempts"] == 2 and taken_over["status"] == "running"
    assert watched.writes_for(job_id) == []
    assert job_row(dsn, job_id) == taken_over
    assert (summary.lost, summary.done, summary.failed, summary.retried) == (1, 0, 0, 0)


def test_a_claims_later_job_whose_lease_the_heartbeat_found_lost_is_not_started(
    dsn: str, clock: FakeClock, watched: WatchedStore, checked_tasks: CheckedRegistry
) -> None:
    """Two jobs claimed together. While the first runs, the second's lease runs out and
    another worker takes it over; the heartbeat's next extension finds it gone. Catches the
    worker starting it anyway once the first returns (a review saw it run beside its new
    holder): a job the keeper knows lost is not run, and nothing is written for it."""
    ran: list[int] = []
    taken: dict[str, Any] = {}

    @checked_tasks.task("first")
    def first(payload: Any, job: JobContext) -> None:
        ran.append(job.id)
        watched.park_heartbeat()  # no extension in flight while the second's lease runs out
        with JobStore.open(dsn, clock) as other:
            other.conn.execute(
                "UPDATE pgkick.jobs SET locked_until = %s WHERE id = %s",
                (clock.now - timedelta(seconds=1), second_id),
            )  # only the second's lease: the first keeps running under its own
            assert [reaped.id for reaped in other.reap_expired()] == [second_id]
            assert [held.id for held in other.claim("default", batch=1, lease=LEASE)] == [second_id]
        taken.update(job_row(dsn, second_id))
        watched.release_heartbeat()
        watched.wait_extensions(1)  # the extension that finds the second gone

    checked_tasks.task("second")(lambda payload: ran.append(second_id))
    (first_id,) = seed(watched, 1, task="first")
    (second_id,) = seed(watched, 1, task="second")
    summary = Worker(
        watched, checked_tasks, NoKicker(), options(SHORT, heartbeat=True)._replace(batch=2)
    ).drain("default", forever)
    checked_tasks.reraise()
    assert ran == [first_id]
    assert taken["attempts"] == 2 and job_row(dsn, second_id) == taken
    assert watched.writes_for(second_id) == []
    assert (summary.lost, summary.done) == (1, 1)


def test_checked_tasks_raise_a_tasks_failed_assertion_after_the_drain(
    dsn: str, store: JobStore
) -> None:
    """Catches: an assertion inside a task swallowed again (the registry not wrapping the
    task): the worker records it as a retry and the test would pass."""
    tasks = CheckedRegistry()

    @tasks.task("asserts")
    def asserts(payload: Any) -> None:
        assert payload["n"] == 2, "payload n is not 2"

    seed(store, 1, task="asserts", payload='{"n": 1}')
    summary = Worker(store, tasks, NoKicker(), options(LEASE, heartbeat=False)).drain(
        "default", forever
    )
    assert summary.retried == 1  # the worker saw a failed task, as it always does
    with pytest.raises(AssertionError, match="payload n is not 2"):
        tasks.reraise()
    tasks.reraise()  # raised once


class CountingKeeper(LeaseKeeper):
    """Counts the jobs whose flags were asked for (what a task's context costs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[int] = []

    def events(self, job_id: int) -> tuple[threading.Event, threading.Event]:
        self.asked.append(job_id)
        return super().events(job_id)


def test_only_a_task_that_takes_the_job_gets_its_context_and_flags(store: JobStore) -> None:
    """Catches: a task declaring `job` handed the blank context (`Registry.takes_job`
    wrong: its lease_lost and cancelled would never be set, its id would be 0); and a
    payload-only task's context still built, with its two events, for every job."""
    tasks = Registry()
    seen: list[tuple[int, bool]] = []

    @tasks.task("plain")
    def plain(payload: Any) -> None:
        seen.append((payload["n"], False))

    @tasks.task("aware")
    def aware(payload: Any, job: JobContext) -> None:
        seen.append((job.id, job.lease_lost is keeper.lost_event(job.id)))

    keeper = CountingKeeper(store, LEASE, interval=None)
    jobs = [
        ClaimedJob(7, "default", "plain", {"n": 1}, 1, 5),
        ClaimedJob(8, "default", "aware", {}, 1, 5),
    ]
    keeper.hold(jobs)
    assert [run_task(tasks, job, keeper) for job in jobs] == [TaskOutcome(), TaskOutcome()]
    assert seen == [(1, False), (8, True)]
    assert keeper.asked[0] == 8  # the first ask: aware's context; plain asked for none


class WorkerKilled(BaseException):
    """What a SIGKILL, an OOM or Lambda's timeout does to a drain, in process: no handler of
    the worker catches it (a task's errors are Exception and SystemExit), so nothing after
    it runs and nothing of the claim is recorded; its leases run out."""


def killing_tasks(started: list[int]) -> Registry:
    """`poison` kills its worker; `ok` records its start. Both record the order they ran in."""
    tasks = Registry()

    @tasks.task("poison")
    def poison(payload: Any, job: JobContext) -> None:
        started.append(job.id)
        raise WorkerKilled

    @tasks.task("ok")
    def ok(payload: Any, job: JobContext) -> None:
        started.append(job.id)

    return tasks


def killed_drain(dsn: str, clock: FakeClock, tasks: Registry, batch: int) -> None:
    """A drain its task kills, its leases then run out and the reaper's own run reaps them."""
    worker_options = WorkerOptions(batch=batch, lease=LEASE, max_fanout=0, heartbeat=False)
    with JobStore.open(dsn, clock) as store, pytest.raises(WorkerKilled):
        Worker(store, tasks, NoKicker(), worker_options).drain("default", forever)
    clock.advance(LEASE.total_seconds() + 1)
    with JobStore.open(dsn, clock) as reaper:
        reap(reaper, NoKicker(), retention=timedelta(days=7))


def outcome(dsn: str, job_id: int) -> tuple[object, ...]:
    row = job_row(dsn, job_id)
    return row["status"], row["attempts"], row["max_attempts"], row["last_error"]


def test_a_job_that_kills_its_worker_uses_up_its_own_attempts_not_its_batch_mates(
    dsn: str, clock: FakeClock
) -> None:
    """Catches: every job of the claim charged when its worker vanishes (attempts counted at
    the claim for the batch, the reaper blind to which job ran): the poison job, first of 5
    (max_attempts 3), killing its worker 3 times failed its 4 batch-mates, never started
    once, 'lease expired (attempt 3 of 3)'. Now the mates lose the first attempt only (then
    they are suspects, given their attempt back each time they lapse unstarted)."""
    started: list[int] = []
    tasks = killing_tasks(started)
    with JobStore.open(dsn, clock) as store:
        (poison,) = seed(store, 1, task="poison", max_attempts=3)
        mates = seed(store, 4, task="ok", max_attempts=3)
    for _ in range(3):
        killed_drain(dsn, clock, tasks, batch=5)
    assert started == [poison] * 3  # (a suspect kept first among suspects, each time)
    assert outcome(dsn, poison) == ("failed", 3, 3, "lease expired (attempt 3 of 3)")
    for mate in mates:  # 3 claims, the first charged, the next two given back
        assert outcome(dsn, mate) == (
            "queued",
            3,
            5,
            "lease expired before it started (attempt 3 given back)",
        )
    with JobStore.open(dsn, clock) as store:
        summary = Worker(store, tasks, NoKicker(), options(LEASE, heartbeat=False)).drain(
            "default", forever
        )
    assert summary.done == 4
    assert [job_row(dsn, mate)["status"] for mate in mates] == ["done"] * 4


def test_a_suspect_that_started_and_vanished_again_is_charged(dsn: str, clock: FakeClock) -> None:
    """Catches: a suspect's attempt given back although it started (its start mark not
    written, or the reaper giving back every lapsed job): a poison job claimed alone would
    then never use up its attempts, and kill a worker for ever."""
    started: list[int] = []
    tasks = killing_tasks(started)
    with JobStore.open(dsn, clock) as store:
        (poison,) = seed(store, 1, task="poison", max_attempts=3)
    killed_drain(dsn, clock, tasks, batch=1)
    assert job_row(dsn, poison)["lapsed"] is True
    killed_drain(dsn, clock, tasks, batch=1)  # a suspect now: marked started, then it kills
    assert started == [poison] * 2
    assert outcome(dsn, poison) == ("queued", 2, 3, "lease expired (attempt 2 of 3)")
    killed_drain(dsn, clock, tasks, batch=1)
    assert outcome(dsn, poison) == ("failed", 3, 3, "lease expired (attempt 3 of 3)")


def test_a_fresh_job_claimed_with_a_suspect_runs_and_is_recorded_before_it(
    dsn: str, clock: FakeClock
) -> None:
    """Catches: suspects run in claim order (a fresh job behind the poison job never
    starts, and is charged), or a fresh job's completion still held when the suspect
    starts (it ran, but the worker died before recording it: charged, run again)."""
    started: list[int] = []
    tasks = killing_tasks(started)
    with JobStore.open(dsn, clock) as store:
        poison, mate = seed(store, 1, task="poison")[0], seed(store, 1, task="ok")[0]
    killed_drain(dsn, clock, tasks, batch=5)  # both suspects now
    clock.advance(1)
    with JobStore.open(dsn, clock) as store:
        (fresh,) = seed(store, 1, task="ok")  # claimed last, run first
    killed_drain(dsn, clock, tasks, batch=5)
    assert started == [poison, fresh, poison]
    assert outcome(dsn, fresh) == ("done", 1, 5, None)
    assert outcome(dsn, poison)[:3] == ("queued", 2, 5)
    assert outcome(dsn, mate)[:3] == ("queued", 2, 6)  # claimed twice, charged once


def test_a_suspects_start_mark_is_fenced_by_its_attempt(dsn: str, clock: FakeClock) -> None:
    """Catches: a give-back by `attempts - 1`: the next claim would hand out the token a
    frozen worker still holds, and that worker's start mark (and completion) would land on
    the new owner's row."""
    with JobStore.open(dsn, clock) as frozen, JobStore.open(dsn, clock) as other:
        (job_id,) = seed(frozen, 1, task="ok")
        frozen.claim("default", batch=1, lease=LEASE)
        clock.advance(LEASE.total_seconds() + 1)
        other.reap_expired()  # lapsed: a suspect
        (held,) = frozen.claim("default", batch=1, lease=LEASE)
        assert held.lapsed
        clock.advance(LEASE.total_seconds() + 1)
        other.reap_expired()  # never started: its attempt given back
        (taken,) = other.claim("default", batch=1, lease=LEASE)
        assert taken.attempts == held.attempts + 1
        assert frozen.start_lapsed([held]) == set()  # the frozen worker, thawed
        assert other.start_lapsed([taken]) == {job_id}
        assert frozen.complete(job_id, held.attempts) is False


def test_a_claim_of_fresh_jobs_sends_no_start_mark(watched: WatchedStore) -> None:
    """Catches: the hot path paying for suspects (a start mark or a flush for a claim that
    holds none): a drain of fresh jobs sends the claim round trips and nothing else."""
    tasks = Registry()
    tasks.task("ok")(lambda payload: None)
    seed(watched, 3, task="ok")
    worker_options = WorkerOptions(batch=10, lease=LEASE, max_fanout=0, heartbeat=False)
    summary = Worker(watched, tasks, NoKicker(), worker_options).drain("default", forever)
    assert summary.done == 3
    assert [s.name for s in watched.statements][1:] == [  # after the seed's insert
        "job_claim",
        "queue_watcher_announce",
        "job_complete_and_claim",  # the 3 completed, nothing claimed
        "transaction_begin",
        "queue_watcher_withdraw",
        "transaction_commit",
        "job_claim",  # the last claim after the withdrawal
    ]
