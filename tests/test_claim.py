"""The claim: the article's race, SKIP LOCKED's behaviour, and the plan it must use."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import LiteralString

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgkick import queries
from pgkick.store import JobStore
from tests.helpers import seed, wait_for_lock_waiters
from tests.spies import WatchedStore

NAIVE_CLAIM = (Path(__file__).parent.parent / "sql" / "bench" / "job_claim_naive.sql").read_text()
LEASE = timedelta(minutes=5)


def test_naive_claim_double_claims_when_two_sessions_meet(dsn: str, store: JobStore) -> None:
    """The article's two sessions: B waits for A's row, then re-checks only `id = 1`."""
    seed(store, 2, max_attempts=10)
    with psycopg.connect(dsn) as a, psycopg.connect(dsn, autocommit=True) as b:
        first = a.execute(NAIVE_CLAIM).fetchone()
        result: list[tuple[int, int] | None] = []
        thread = threading.Thread(target=lambda: result.append(b.execute(NAIVE_CLAIM).fetchone()))
        thread.start()
        wait_for_lock_waiters(dsn, [b.info.backend_pid])
        a.commit()
        thread.join(10)
    assert first == (1, 1)
    assert result == [(1, 2)]  # the same job, claimed twice; job 2 never touched


def test_eight_sessions_naive_claim_loses_jobs_pgkick_claim_runs_each_once(
    dsn: str, store: JobStore
) -> None:
    """8 connections x 1,250 claims over 10,000 jobs: the article's table, both ways."""
    seed(store, 10_000, max_attempts=10)

    def naive_worker() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(1_250):
                conn.execute(NAIVE_CLAIM)

    run_threads(naive_worker, 8)
    done, max_attempts = store.conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'done'), max(attempts) FROM pgkick.jobs"
    ).fetchone() or (0, 0)
    assert done < 10_000 and max_attempts > 1, (done, max_attempts)

    store.conn.execute("TRUNCATE pgkick.jobs")
    seed(store, 10_000)

    def pgkick_worker() -> None:
        with JobStore.open(dsn) as mine:
            while jobs := mine.claim("default", batch=10, lease=LEASE):
                assert len(mine.complete_many(jobs)) == len(jobs)

    run_threads(pgkick_worker, 8)
    counts = store.conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'done'), min(attempts), max(attempts)"
        " FROM pgkick.jobs"
    ).fetchone()
    assert counts == (10_000, 1, 1)


def run_threads(target: object, count: int) -> None:
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            target()  # type: ignore[operator]
        except BaseException as exc:  # reported below, so no failure hides in a thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors


def test_second_claim_skips_a_locked_row_at_once(dsn: str, store: JobStore) -> None:
    """A holds job 1 in an open transaction; B's claim gets job 2 without waiting."""
    first, second = seed(store, 2)
    with psycopg.connect(dsn) as a:
        held = JobStore(a).claim("default", batch=1, lease=LEASE)
        assert [job.id for job in held] == [first]
        # B would wait for A without SKIP LOCKED; the lock timeout turns a wait into a failure.
        with JobStore.open(make_conninfo(dsn, options="-c lock_timeout=2000")) as b:
            started = time.perf_counter()
            got = b.claim("default", batch=1, lease=LEASE)
            elapsed = time.perf_counter() - started
        a.rollback()
    assert [job.id for job in got] == [second]
    assert elapsed < 0.1, f"B waited {elapsed * 1000:.1f} ms"


@pytest.mark.parametrize("claim", [queries.JOB_CLAIM, queries.JOB_CLAIM_PLAIN])
def test_claim_plan_is_limit_over_lockrows_over_the_partial_index(
    store: JobStore, claim: LiteralString
) -> None:
    """Both claims (the serialised one and the plain one) scan the ready index in order."""
    seed(store, 3_000)
    store.conn.execute("ANALYZE pgkick.jobs")
    plan = "\n".join(
        row[0]
        for row in store.conn.execute(
            "EXPLAIN (COSTS OFF) " + claim,
            {"queue": "default", "batch": 10, "lease": LEASE, "now": None},
        )
    )
    lines = [line.strip() for line in plan.splitlines()]
    limit = next(i for i, line in enumerate(lines) if line.endswith("Limit"))
    # the Limit's InitPlans (the queue's running limit, migration 0004) come first
    lock = next(i for i in range(limit + 1, len(lines)) if lines[i].startswith("->  LockRows"))
    assert all("LockRows" not in line for line in lines[limit + 1 : lock]), plan
    # the plain claim's gate (a one-time filter: no scan at all when the queue needs the lock)
    below = [x for x in lines[lock + 1 :] if not x.startswith(("->  Result", "One-Time Filter"))]
    assert "Index Scan using jobs_ready_idx on jobs" in below[0], plan


@pytest.mark.parametrize("batch", [1, 10, 50])
def test_claim_takes_a_batch_under_a_lease_in_run_at_order(
    dsn: str, store: JobStore, batch: int
) -> None:
    ids = seed(store, 60)
    jobs = store.claim("default", batch=batch, lease=LEASE)
    assert [job.id for job in jobs] == ids[:batch]
    assert {job.attempts for job in jobs} == {1}
    status, lease = store.conn.execute(
        "SELECT status, locked_until - now() FROM pgkick.jobs WHERE id = %s", (ids[0],)
    ).fetchone() or (None, None)
    assert status == "running"
    assert timedelta(minutes=4) < lease <= LEASE
    assert store.claim("other", batch=batch, lease=LEASE) == []


def test_a_round_trip_sends_the_complete_before_the_claim(dsn: str) -> None:
    """The worker's round trip: complete the last batch, then claim, two statements in one
    pipeline. Catches a claim sent first or folded into one statement with the complete
    (the executor may then claim first): a claim's FOR UPDATE keeps its lock on a row
    another worker is completing, and two workers could each wait for the other (seen as
    DeadlockDetected in the bench's 8-worker drain)."""
    with WatchedStore.open(dsn) as store:
        seed(store, 20)
        jobs = store.claim("default", batch=10, lease=LEASE)
        store.statements.clear()
        held, more = store.complete_many_and_claim(jobs, "default", batch=10, lease=LEASE)
        assert held == {job.id for job in jobs} and len(more) == 10
        assert [s.name for s in store.statements] == ["job_complete_many", "job_claim_plain"]
