"""Producers under threads: a few shared connections, concurrent enqueues grouped into one commit.

Interleavings are forced: the test holds a table lock that the first enqueue's
INSERT must wait for (seen waiting in pg_stat_activity), so the next callers
queue behind it for certain; sessions and transactions are read from the server
(pg_stat_activity, each row's xmin), not from the library's own counters alone.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick.connections import linger
from pgkick.connections import pool as linger_pool
from pgkick.connections.db import server_clock
from pgkick.connections.linger import APPLICATION_NAME
from pgkick.connections.pool import LingeringPool
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.producer import group_commit
from pgkick.producer.group_commit import GroupCommit
from pgkick.store.producer import ProducerStore
from pgkick.validation import job_spec
from tests.helpers import Ticks, sessions_of, statement_calls
from tests.test_producer import RecordingKicker


@pytest.fixture(autouse=True)
def _no_lingering_left() -> Iterator[None]:
    yield
    linger.close_all()


def producer_sessions(dsn: str) -> int:
    return sessions_of(dsn, APPLICATION_NAME)


def backend_pid(pool: LingeringPool) -> int:
    with pool.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def rows(dsn: str) -> list[tuple[Any, ...]]:
    """(payload's n, task, transaction id) of every job, by n."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT (payload->>'n')::int, task, xmin::text::bigint FROM pgkick.jobs ORDER BY 1"
        ).fetchall()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Poll the server for a state the test forced (never a sleep standing in for an order)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def insert_waiting_on_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock' AND query LIKE '%%job_insert%%'",
            (APPLICATION_NAME,),
        ).fetchone()
    return bool(row and row[0])


class Caller(threading.Thread):
    """One enqueue_and_kick in a thread, keeping its job id or its exception."""

    def __init__(self, dsn: str, n: int, task: str = "t", queue: str = "default", **kw: Any):
        super().__init__(daemon=True)
        self.args_ = (dsn, n, task, queue, kw)
        self.job_id: int | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        dsn, n, task, queue, kw = self.args_
        try:
            self.job_id = producer.enqueue_and_kick(
                {"n": n}, task=task, queue=queue, dsn=dsn, **{"kicker": NoKicker(), **kw}
            )
        except BaseException as exc:
            self.error = exc

    def result(self) -> int | None:
        self.join(30)
        assert not self.is_alive()
        return self.job_id


def the_group(dsn: str) -> GroupCommit:
    return group_commit.group_for(linger_pool.shared(dsn, 1.0), server_clock)


def first_waits_then_others_queue(
    dsn: str, lock: psycopg.Connection[Any], others: Callable[[], list[Caller]]
) -> tuple[Caller, list[Caller]]:
    """Caller 0's INSERT waits for the test's lock; the others queue behind it; then release."""
    lock.execute("LOCK TABLE pgkick.jobs IN SHARE MODE")  # inserts wait for it
    first = Caller(dsn, 0, queue="a")
    wait_until(lambda: insert_waiting_on_lock(dsn), "the first insert to wait on the lock")
    queued = others()
    assert the_group(dsn).wait_for_waiting(len(queued), 20)
    lock.rollback()
    return first, queued


def test_enqueues_arriving_during_a_commit_share_the_next_commit_and_one_kick(dsn: str) -> None:
    """Catches: callers not grouped (each its own transaction: distinct xmin), a grouped
    caller returning before its commit or with another's id, a job inserted twice, and
    more than one kick per queue for a group."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as lock:
        first, queued = first_waits_then_others_queue(
            dsn, lock, lambda: [Caller(dsn, n, queue="b", kicker=kicker) for n in range(1, 5)]
        )
        ids = [first.result(), *[c.result() for c in queued]]
    assert all(c.error is None for c in [first, *queued])
    found = rows(dsn)
    assert [n for n, _, _ in found] == [0, 1, 2, 3, 4]  # each job exactly once
    xids = [xid for _, _, xid in found]
    assert len(set(xids[1:])) == 1 and xids[0] != xids[1]  # one transaction for the four
    assert the_group(dsn).groups == 1
    with psycopg.connect(dsn) as conn:  # each caller got its own job's id
        by_id = dict(conn.execute("SELECT id, (payload->>'n')::int FROM pgkick.jobs").fetchall())
    assert [by_id[i] for i in ids if i is not None] == [0, 1, 2, 3, 4]
    assert kicker.kicks == [("b", "enqueue")]  # one kick for the group's queue
    assert linger_pool.shared(dsn, 1.0).opened == 1 and producer_sessions(dsn) == 1


def test_a_refused_row_fails_its_own_caller_and_the_others_commit_once(dsn: str) -> None:
    """Catches: one bad row failing the whole group, a retry alone inserting a job a second
    time, and bad input joining a group instead of failing before anything is sent."""
    with psycopg.connect(dsn, autocommit=True) as conn:  # a row only the server refuses
        conn.execute("ALTER TABLE pgkick.jobs ADD CONSTRAINT no_poison CHECK (task <> 'poison')")

    def others() -> list[Caller]:
        callers = [Caller(dsn, n, task="poison" if n == 3 else "t") for n in range(1, 6)]
        with pytest.raises(ValueError, match="payload"):  # refused before it joins
            producer.enqueue_and_kick(float("nan"), task="t", dsn=dsn, kicker=NoKicker())
        return callers

    with psycopg.connect(dsn) as lock:
        first, queued = first_waits_then_others_queue(dsn, lock, others)
        for caller in [first, *queued]:
            caller.result()
    assert isinstance(queued[2].error, psycopg.errors.CheckViolation)
    assert [c.error for i, c in enumerate(queued) if i != 2] == [None] * 4
    assert [(n, task) for n, task, _ in rows(dsn)] == [(n, "t") for n in (0, 1, 2, 4, 5)]
    assert the_group(dsn).groups == 0  # the group's transaction was rolled back


def test_a_leader_whose_session_dies_fails_alone_and_its_followers_still_commit(
    dsn: str,
) -> None:
    """Catches: followers stranded (waiting forever) when the leader's call fails, and a
    broken connection handed to the next group."""
    with psycopg.connect(dsn) as lock:
        lock.execute("LOCK TABLE pgkick.jobs IN SHARE MODE")
        first = Caller(dsn, 0)
        wait_until(lambda: insert_waiting_on_lock(dsn), "the first insert to wait")
        queued = [Caller(dsn, n) for n in range(1, 4)]
        assert the_group(dsn).wait_for_waiting(3, 20)
        lock.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (APPLICATION_NAME,),
        )
        lock.rollback()
    assert first.result() is None and isinstance(first.error, psycopg.OperationalError)
    assert [c.result() is not None and c.error is None for c in queued] == [True] * 3
    assert [n for n, _, _ in rows(dsn)] == [1, 2, 3]


def test_threads_share_a_few_sessions_and_every_job_lands_once(dsn: str) -> None:
    """Catches: a connection per busy call (the old behaviour opened hundreds), and lost or
    doubled jobs under real racing threads."""
    threads, each = 8, 25
    start = threading.Barrier(threads)
    peak = [0]

    def enqueue(t: int) -> None:
        start.wait()
        for k in range(each):
            producer.enqueue_and_kick({"n": t * each + k}, task="t", dsn=dsn, kicker=NoKicker())
        peak[0] = max(peak[0], producer_sessions(dsn))

    workers = [threading.Thread(target=enqueue, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [n for n, _, _ in rows(dsn)] == list(range(threads * each))
    assert linger_pool.shared(dsn, 1.0).opened <= linger_pool.DEFAULT_SIZE
    assert 1 <= peak[0] <= linger_pool.DEFAULT_SIZE


def test_a_full_pool_makes_a_caller_wait_for_a_connection_given_back(dsn: str) -> None:
    """Catches: a pool opening past its size (a session per busy call, as before) and a
    caller served with a connection someone else still holds."""
    pool = LingeringPool(dsn, 60, size=2, closer=False)
    got: list[int] = []
    with ExitStack() as held:
        pids = []
        for _ in range(2):
            conn = held.enter_context(pool.connection())
            pids.append(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        waiter = threading.Thread(target=lambda: got.append(backend_pid(pool)))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive() and not got  # no third connection: it waits
    waiter.join(30)
    assert got and got[0] in pids
    assert pool.opened == 2 and producer_sessions(dsn) == 2
    pool.close()


def test_pool_connections_close_after_linger_and_the_closer_needs_no_help(dsn: str) -> None:
    """Catches: pooled sessions staying open without work (a serverless database never
    suspends)."""
    ticks = Ticks()
    pool = LingeringPool(dsn, 1.0, size=2, clock=ticks, closer=False)
    with pool.connection(), pool.connection():
        pass
    assert producer_sessions(dsn) == 2
    ticks.now += 0.9
    first = backend_pid(pool)  # the newest is lent first; the other ages
    ticks.now += 0.2
    assert not pool.close_if_idle() and producer_sessions(dsn) == 1
    assert backend_pid(pool) == first
    ticks.now += 1.0
    assert pool.close_if_idle() and producer_sessions(dsn) == 0
    closing = LingeringPool(dsn, 0.05, size=2)
    backend_pid(closing)
    wait_until(lambda: producer_sessions(dsn) == 0, "the closer thread to close the session")


def test_a_forked_child_opens_its_own_and_leaves_the_parents_session_alone(dsn: str) -> None:
    """Catches: a child using or closing the parent's pooled session."""
    pool = LingeringPool(dsn, 60, size=2, closer=False)
    parent = backend_pid(pool)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit code
        try:
            code = 0 if backend_pid(pool) != parent else 1
            pool.close()
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend_pid(pool) == parent


def test_a_group_whose_session_dies_fails_every_member_and_retries_none(dsn: str) -> None:
    """Catches: retrying a group alone after an error whose outcome is unknown (the session
    died around the COMMIT): a job could then exist twice. Here none committed, and none
    may be inserted afterwards by a hidden retry."""

    def terminate_producers(admin: psycopg.Connection[Any]) -> None:
        admin.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (APPLICATION_NAME,),
        )

    with psycopg.connect(dsn) as lock, psycopg.connect(dsn, autocommit=True) as admin:
        lock.execute("LOCK TABLE pgkick.jobs IN SHARE MODE")
        first = Caller(dsn, 0)
        wait_until(lambda: insert_waiting_on_lock(dsn), "the first insert to wait")
        queued = [Caller(dsn, n) for n in range(1, 3)]
        assert the_group(dsn).wait_for_waiting(2, 20)
        terminate_producers(admin)  # the lone leader fails; the two now wait as one group
        assert first.result() is None
        wait_until(lambda: insert_waiting_on_lock(dsn), "the group's insert to wait")
        terminate_producers(admin)
        for caller in queued:
            caller.result()
        lock.rollback()
    assert all(isinstance(c.error, psycopg.OperationalError) for c in queued)
    assert rows(dsn) == [] and the_group(dsn).groups == 0


def test_a_groups_members_coming_back_are_waited_for_and_share_the_next_commit(
    dsn: str,
) -> None:
    """Catches: the first member back from a group sending its job alone while the others
    come back behind it (threads enqueuing in a loop formed groups of 1, 8, 1, 8: half the
    round trips carried one job)."""
    group = the_group(dsn)
    group.return_wait = 60.0  # the bound is never reached: the member's arrival ends the wait
    with psycopg.connect(dsn) as lock:
        first, queued = first_waits_then_others_queue(
            dsn, lock, lambda: [Caller(dsn, n) for n in (1, 2)]
        )
        for caller in [first, *queued]:
            caller.result()
    assert group.groups == 1  # {1, 2}: its two members are on their way back
    back = Caller(dsn, 3)  # the first one back leads, and waits for the other
    assert group.wait_for_waiting(1, 20)  # queued, not sent
    other = Caller(dsn, 4)
    assert back.result() is not None and other.result() is not None
    xids = {n: xid for n, _, xid in rows(dsn)}
    assert xids[3] == xids[4] and xids[3] != xids[1]  # one transaction for the two
    assert group.groups == 2


def test_a_lone_caller_never_waits_and_a_member_that_stays_away_costs_the_bound_once(
    dsn: str,
) -> None:
    """Catches: a caller waiting for company that is not on its way (after a group of one,
    or forever for a member that does not come back)."""
    group = the_group(dsn)
    group.return_wait = 60.0
    started = time.monotonic()
    for n in range(3):  # each a group of one: nobody to wait for (a wait would last 60 s)
        producer.enqueue_and_kick({"n": n}, task="t", dsn=dsn, kicker=NoKicker())
    assert time.monotonic() - started < 30
    group.return_wait = 0.2
    with psycopg.connect(dsn) as lock:
        first, queued = first_waits_then_others_queue(
            dsn, lock, lambda: [Caller(dsn, n) for n in (3, 4)]
        )
        for caller in [first, *queued]:
            caller.result()
    # {3, 4} ended; only one caller comes: it waits for the other at most 0.2 s, then goes
    assert Caller(dsn, 5).result() is not None
    assert [n for n, _, _ in rows(dsn)] == [0, 0, 1, 2, 3, 4, 5]  # the lock's first is 0 too


def test_a_group_is_one_insert_unless_its_jobs_carry_different_trace_contexts(dsn: str) -> None:
    """Catches: a group sending one INSERT a job (about 70 us of client CPU a statement in
    the pipeline), a group's one INSERT giving its jobs one trace context when they were
    enqueued under different spans, and a group with no kick to reserve wrapping its one
    INSERT in a BEGIN and a COMMIT (on the autocommit connection it is its own transaction)."""
    pending = timedelta(seconds=30)

    def calls() -> tuple[int, int, int]:
        return (
            statement_calls(dsn, ["-- job\\_insert:%"]),
            statement_calls(dsn, ["-- job\\_insert\\_many:%"]),
            statement_calls(dsn, ["-- transaction\\_begin:%"]),
        )

    specs = [job_spec({"n": n}, task="t") for n in range(3)]
    traced = [
        spec._replace(traceparent=f"00-{n:032x}-{n:016x}-01") for n, spec in enumerate(specs, 1)
    ]
    with ProducerStore.open(dsn) as store:
        first = calls()
        plain, _ = group_commit.insert_group_and_reserve(store, specs, reserve=[], pending=pending)
        second = calls()
        spans, _ = group_commit.insert_group_and_reserve(store, traced, reserve=[], pending=pending)
        third = calls()
    assert [b - a for a, b in zip(first, second, strict=True)] == [0, 1, 0]
    assert [b - a for a, b in zip(second, third, strict=True)] == [3, 0, 1]
    with psycopg.connect(dsn) as conn:
        stored = dict(conn.execute("SELECT id, traceparent FROM pgkick.jobs").fetchall())
    assert [stored[job.id] for job in plain] == [None, None, None]
    assert [stored[job.id] for job in spans] == [spec.traceparent for spec in traced]


def test_a_process_with_many_open_files_still_reuses_its_lingering_connection(dsn: str) -> None:
    """Catches: the idle check (did the server speak?) refusing a descriptor past select()'s
    FD_SETSIZE (1,024) and reading the refusal as "the server closed it": a busy web server's
    producer then opened, and closed, a connection for every enqueue (a review, F2)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = hard if hard == resource.RLIM_INFINITY else max(hard, 2048)
    try:  # a hard limit under 2,048 is raised where the process may (root: CI's machines)
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, raised))
    except (ValueError, PermissionError):
        pytest.skip("needs a descriptor limit of at least 2,048, which this process may not set")
    held = [os.open(os.devnull, os.O_RDONLY)]
    try:
        while held[-1] < 1100:  # the app's sockets and files: every lower descriptor taken
            held.append(os.dup(held[0]))
        pool = LingeringPool(dsn, 60, size=2, closer=False)
        first = backend_pid(pool)
        assert backend_pid(pool) == first and pool.opened == 1
        pool.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # lowering is always allowed
