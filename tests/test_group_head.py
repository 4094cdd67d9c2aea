"""A group's head is fixed at enqueue: retried and snoozed jobs keep their place, hold their
group, and one claim never takes two jobs of a group, whatever the batch (issue 31.2).

Each test names the break it catches: the head rule of migration 0007 (the first queued
job in (priority, run_at, id), or any queued job with attempts > 0)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick import Snooze, cli
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.validation import job_spec
from pgkick.worker.loop import Worker, WorkerOptions
from tests.helpers import FakeClock
from tests.store import JobStore

LEASE = timedelta(minutes=5)
OPTIONS = WorkerOptions(batch=10, lease=LEASE, max_fanout=0, heartbeat=False, backoff_jitter=0)


def forever() -> int:
    return 600_000


@pytest.fixture(autouse=True)
def no_kicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)


def statuses(dsn: str) -> dict[int, tuple[str, int]]:
    """n -> (status, attempts)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT (payload->>'n')::int, status, attempts FROM pgkick.jobs")
        return {n: (status, attempts) for n, status, attempts in rows}


def make_due(dsn: str) -> None:
    """Time passes: every queued job is due now (the retry's backoff has run out)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE pgkick.jobs SET run_at = now() WHERE status = 'queued'")


def test_pgkick_retry_of_a_failed_group_runs_it_one_job_at_a_time_held_by_a_new_failure(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's run: three jobs of a group fail for good; `pgkick retry --queue ledger
    --extra-attempts 3`; one worker with a batch of 10. Catches the head rule of 0007, which
    took all three retried jobs (attempts > 0: each a head) in one batch, ran them together,
    and let the second and third complete while the first failed again."""
    runs: list[tuple[int, int]] = []  # (n, attempt) in the order they ran
    tasks = Registry()

    @tasks.task("post")
    def post(payload: Any, job: JobContext) -> None:
        runs.append((payload["n"], job.attempt))
        if job.attempt == 1 or (payload["n"] == 1 and job.attempt == 2):
            raise RuntimeError("ledger down")

    with JobStore.open(dsn) as store:
        for n in (1, 2, 3):
            store.insert(
                job_spec({"n": n}, task="post", queue="ledger", group="acct", max_attempts=1)
            )
        worker = Worker(store, tasks, NoKicker(), OPTIONS)
        worker.drain("ledger", forever)
        assert statuses(dsn) == {1: ("failed", 1), 2: ("failed", 1), 3: ("failed", 1)}
        runs.clear()

        argv = ["retry", "--queue", "ledger", "--extra-attempts", "3", "--dsn", dsn]
        assert cli.main(argv) == 0
        capsys.readouterr()
        summary = Worker(store, tasks, NoKicker(), OPTIONS).drain("ledger", forever)
        assert runs == [(1, 2)]  # the group's head only; it failed again
        assert (summary.batches, summary.retried, summary.done) == (1, 1, 0)
        # its retry holds the group: 2 and 3 wait behind it
        assert statuses(dsn) == {1: ("queued", 2), 2: ("queued", 1), 3: ("queued", 1)}

        make_due(dsn)
        summary = Worker(store, tasks, NoKicker(), OPTIONS).drain("ledger", forever)
        assert runs == [(1, 2), (1, 3), (2, 2), (3, 2)]  # in order, one batch each
        assert (summary.batches, summary.done) == (3, 3)


def test_a_snooze_holds_its_group_on_its_first_attempt_as_on_a_retried_one(
    dsn: str, clock: FakeClock
) -> None:
    """Catches the inconsistency of 0007's head: a job snoozed on its first attempt (attempts
    back to 0, run_at later) let the next job of its group run first; snoozed on a retried
    attempt it held the group. Now both hold it."""
    runs: list[tuple[int, int]] = []
    tasks = Registry()

    @tasks.task("step")
    def step(payload: Any, job: JobContext) -> None:
        runs.append((payload["n"], job.attempt))
        if payload["n"] == 1 and len(runs) == 1:
            raise Snooze(30)

    with JobStore.open(dsn, clock) as store:
        for n in (1, 2):
            store.insert(job_spec({"n": n}, task="step", group="g"))
        Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)
        assert runs == [(1, 1)]  # snoozed: 2 waits behind it
        assert statuses(dsn) == {1: ("queued", 0), 2: ("queued", 0)}
        clock.advance(30)
        Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)
        assert runs == [(1, 1), (1, 1), (2, 1)]


def test_a_claim_takes_one_job_of_a_group_whatever_the_batch_and_attempts(
    dsn: str, clock: FakeClock
) -> None:
    """Store level: failed jobs retried out of their order (the last first, with more attempts
    used) still run in the group's order, one per claim; the ready checks agree with the
    claim. Catches any head rule that looks at attempts or at run_at moved by a retry."""
    with JobStore.open(dsn, clock) as store:
        ids = [
            store.insert(job_spec({"n": n}, task="t", group="g", max_attempts=1)).id
            for n in (1, 2, 3)
        ]
        store.insert(job_spec({"n": 4}, task="t", group="h"))
        for job in store.claim("default", batch=10, lease=LEASE):  # 1 and 4: the heads
            if job.payload["n"] == 1:
                assert store.fail(job.id, job.attempts, "boom").status == "failed"
            else:
                store.complete_many([job])
        for n in (2, 3):
            (job,) = store.claim("default", batch=10, lease=LEASE)
            assert job.payload["n"] == n
            assert store.fail(job.id, job.attempts, "boom").status == "failed"
        store.retry_failed(ids=[ids[2]], queue=None, task=None, extra_attempts=1)
        store.retry_failed(ids=ids[:2], queue=None, task=None, extra_attempts=2)
        assert store.ready_exists("default")
        assert store.ready_by_queue() == {"default": 1}
        order = []
        for _ in range(3):
            jobs = store.claim("default", batch=10, lease=LEASE)
            assert len(jobs) == 1
            assert store.claim("default", batch=10, lease=LEASE) == []  # g runs: held
            order.append(jobs[0].payload["n"])
            store.complete_many(jobs)
        assert order == [1, 2, 3]
