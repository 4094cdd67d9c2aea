"""The claim: the article's race, SKIP LOCKED's behaviour, and the plan it must use."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgkick.store.worker import ClaimedJob
from tests.helpers import seed, wait_for_lock_waiters
from tests.spies import WatchedStore
from tests.store import JobStore

NAIVE_CLAIM = (Path(__file__).parent.parent / "tools" / "sql" / "job_claim_naive.sql").read_text()
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

    store.conn.execute("TRUNCATE pgkick.jobs CASCADE")  # and its dependencies (0017), steps (0018)
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


def claim_plans(store: JobStore, claims: int) -> list[str]:
    """The plans the server ran for the statements inside job_claim (auto_explain, nested
    statements, sent to this client as notices), for the last of `claims` claims."""
    notes: list[str] = []
    store.conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
    try:
        store.conn.execute("LOAD 'auto_explain'")
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip("LOAD 'auto_explain' needs a superuser: DATABASE_URL's role is not one")
    for setting in ("log_min_duration = 0", "log_nested_statements = on"):
        store.conn.execute("SET auto_explain." + setting)
    store.conn.execute("SET client_min_messages = log")
    for _ in range(claims):
        notes.clear()
        store.complete_many(store.claim("default", batch=10, lease=LEASE))
    store.conn.execute("SET client_min_messages = notice")
    return [n for n in notes if "Query Text: SELECT id, queue, task" not in n]  # the call


@pytest.mark.parametrize("grouped", ["none", "this queue", "another queue"])
def test_the_claim_runs_its_cached_plan_limit_over_lockrows_over_the_ready_index(
    store: JobStore, grouped: str
) -> None:
    """Both branches of job_claim (no group or limit: no lock; live groups: the queue's lock)
    scan the ready index in claim order under a Limit, lock only what the Limit passes,
    update by primary key (an index scan or bitmap), and run a generic plan the session
    keeps (its index condition has the parameter, not the literal queue). Catches a plan
    replanned at every call (the cost migration 0007 removed: the claim with groups was
    1.7x the old claim), or a generic plan gone bad (a hash join over a scan of the
    whole table: 13 ms a claim at 100,000 jobs, seen while writing 0007), or a check for
    live groups planned as a table scan (with grouped jobs in another queue only, it read
    the whole table at every claim: 37 ms at 100,000 jobs)."""
    seed(store, 3_000)
    if grouped == "this queue":
        store.conn.execute("UPDATE pgkick.jobs SET group_key = 'g' || (id % 50) WHERE id % 2 = 0")
    elif grouped == "another queue":
        store.conn.execute(
            "UPDATE pgkick.jobs SET queue = 'orders', group_key = 'g' || (id % 50)"
            " WHERE id % 4 <> 0"
        )
    store.conn.execute("ANALYZE pgkick.jobs")
    plans = claim_plans(store, 7)  # past the 5 custom plans a plan cache may try first
    assert all("Seq Scan" not in p for p in plans), plans  # the check, the lock, the claim
    (plan,) = [p for p in plans if "FOR UPDATE SKIP LOCKED" in p and "Update on jobs" in p]
    lines = [line.strip() for line in plan.splitlines()]
    limit = next(i for i, line in enumerate(lines) if line.startswith("->  Limit"))
    assert lines[limit + 1].startswith("->  LockRows"), plan
    assert lines[limit + 2].startswith("->  Index Scan using jobs_ready_idx on jobs"), plan
    assert lines[limit + 3].startswith("Index Cond: ((queue = $"), plan  # generic: cached
    assert "Index Cond: (id = ANY" in plan, plan  # the update finds its rows by primary key


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


def test_a_round_trip_completes_before_it_claims(dsn: str) -> None:
    """The worker's round trip is one statement (job_complete_and_claim, migration 0008)
    whose complete runs, and waits for its rows, before its claim locks any. A row of the
    finished batch is held by another transaction; while the round trip waits for it, a
    third session must be able to claim every queued job: a claim run first (or folded
    with the complete into one statement, the executor's order) would hold the next batch
    locked while waiting, and two workers could each wait for the other (seen as
    DeadlockDetected in the bench's 8-worker drain). Also catches a second statement sent
    for the round trip, and held ids or claimed jobs mixed up in the answer."""
    with WatchedStore.open(dsn) as store, JobStore.open(dsn) as other:
        ids = seed(store, 30)
        jobs = store.claim("default", batch=10, lease=LEASE)
        with psycopg.connect(dsn) as blocker:
            blocker.execute("SELECT 1 FROM pgkick.jobs WHERE id = %s FOR UPDATE", (ids[0],))
            store.statements.clear()
            answer: list[tuple[set[int], list[ClaimedJob]]] = []
            thread = threading.Thread(
                target=lambda: answer.append(
                    store.complete_many_and_claim(jobs, "default", batch=10, lease=LEASE)
                )
            )
            thread.start()
            wait_for_lock_waiters(dsn, [store.conn.info.backend_pid])
            taken = other.claim("default", batch=20, lease=LEASE)
            blocker.rollback()
            thread.join(10)
        assert [job.id for job in taken] == ids[10:30]  # nothing was locked by the waiter
        assert [s.name for s in store.statements] == ["job_complete_and_claim"]
        held, more = answer[0]
        assert held == set(ids[:10]) and more == []
        fresh = seed(store, 3)
        lost = jobs[0]._replace(attempts=jobs[0].attempts + 1)  # as if reclaimed meanwhile
        held, more = store.complete_many_and_claim(
            [lost, *taken[:2]], "default", batch=2, lease=LEASE
        )
        assert held == {taken[0].id, taken[1].id}
        assert [job.id for job in more] == fresh[:2]
        assert all(job.task is not None and job.attempts == 1 for job in more)
