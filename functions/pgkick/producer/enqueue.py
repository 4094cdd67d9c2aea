"""What an app calls: enqueue jobs, and kick workers only after the jobs are committed.

Why after commit: a worker kicked before the commit finds nothing (the row is
not visible yet), and a kick after a rollback would announce a job that never
existed. Why a kick failure never raises: the job is committed, so it is safe;
the next wake-up (a later kick, a scheduled wake, the reaper) runs it. Raising
would invite the caller to enqueue it again.

Two forms:
    job_id = pgkick.enqueue_and_kick({"to": "a@b.c"}, task="send_email")

    with pgkick.transaction(conn) as jobs:      # the app's own transaction
        conn.execute("INSERT INTO orders ...")
        jobs.enqueue({"order": 42}, task="send_receipt")
    # committed here, then kicked; an exception inside rolls back and kicks nothing
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Unpack

from pgkick import config
from pgkick.connections import linger  # noqa: F401 (tests close producer.linger)
from pgkick.connections import pool as linger_pool
from pgkick.connections.db import Clock, Connection, idle_outside_transaction, server_clock
from pgkick.connections.schema_advice import schema_advice
from pgkick.errors import MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer import group_commit
from pgkick.producer.after_commit import kick_committed
from pgkick.producer.after_commit import stats as stats  # tests and operators read producer.stats
from pgkick.producer.options import (
    CommitOptions,
    EnqueueOptions,
    ProducerOptions,
    check_connection,
    commit_only,
    where_to_commit,
)
from pgkick.producer.plan import EnqueuePlan, execute_sync, job_specs, now
from pgkick.store import dependencies
from pgkick.store.producer import ProducerStore, QueuedJob
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES, JobSpec

log = logging.getLogger("pgkick.producer")
INSERT_CHUNK = 5_000  # measured: 100,000 jobs insert fastest in chunks of 5,000-10,000


class Enqueuer:
    """Inserts jobs through one store; remembers them so they are kicked after commit."""

    def __init__(
        self,
        store: ProducerStore,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.store = store
        self.max_payload_bytes = max_payload_bytes
        self.queued: list[QueuedJob] = []

    @schema_advice  # no schema: say to migrate
    def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int:
        """Insert one job (or find the live one holding its unique key: that one is not
        kicked again)."""
        plan = EnqueuePlan.build(payload, task, options, max_payload_bytes=self.max_payload_bytes)
        return self.enqueue_plan(plan)

    def enqueue_plan(self, plan: EnqueuePlan) -> int:
        """Insert one planned job (and link it to its parents, `after=`)."""
        after = plan.spec.after
        if after:  # the parents' check, the insert and the link: one transaction
            with self.store.transaction():
                dependencies.check_parents(self.store, [after])
                job, inserted = execute_sync(self.store, plan)
                waiting = dependencies.link(self.store, [job.id], [after]) if inserted else set()
            if inserted and job.id not in waiting:  # a waiting job is kicked by its last parent
                self.queued.append(job)
            return job.id
        job, inserted = execute_sync(self.store, plan)
        if inserted:
            self.queued.append(job)
        return job.id

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """The calls inside written together or not at all (a workflow's levels, each an
        enqueue_many): a savepoint, in the transaction if one is open; rolled back, their
        jobs are forgotten too, so nothing is kicked for them."""
        kept = len(self.queued)
        try:
            with self.store.transaction():
                yield
        except BaseException:
            del self.queued[kept:]
            raise

    @schema_advice  # no schema: say to migrate
    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Each mapping holds enqueue's arguments (payload, task, queue, ...); one commit.

        Validated chunk by chunk while the server inserts the chunk before; a bad
        job anywhere raises (naming jobs[i]) and rolls back the chunks already sent.
        """
        afters: list[tuple[tuple[int, str], ...]] = []  # each job's parents, in input order

        def chunks() -> Iterator[list[JobSpec]]:
            for chunk in itertools.batched(enumerate(jobs), INSERT_CHUNK):
                specs = job_specs(chunk, self.max_payload_bytes)
                afters.extend(spec.after for spec in specs)
                yield specs

        with self.store.transaction():  # jobs and their links commit together, or nothing
            every, inserted = self.store.insert_many_unique(chunks())
            waiting = self._link_many(every, inserted, afters)
        # a skipped duplicate is not kicked again, nor a waiting job (its last parent is)
        self.queued.extend(job for job in inserted if job.id not in waiting)
        return [job.id for job in every]

    def _link_many(
        self,
        every: list[QueuedJob],
        inserted: list[QueuedJob],
        afters: list[tuple[tuple[int, str], ...]],
    ) -> set[int]:
        """Link enqueue_many's new jobs to their parents (checked first: an unknown one
        raises, and the batch's transaction rolls back)."""
        children, parents = dependencies.new_pairs(
            [job.id for job in every],
            [job.id for job in inserted],
            afters,
        )
        if not children:
            return set()
        dependencies.check_parents(self.store, parents)
        return dependencies.link(self.store, children, parents)


@contextmanager
def transaction(
    conn: Connection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> Iterator[Enqueuer]:
    """Enqueue inside the app's own transaction; kick once it has committed, never before."""
    check_connection("pgkick.transaction", conn, asyncio=False)
    if not idle_outside_transaction(conn):
        raise MisuseError(
            "pgkick.transaction() must own the transaction: pass a connection with "
            "autocommit off and no transaction in progress (commit or roll back first)"
        )
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    store = ProducerStore(conn, clock)
    enqueuer = Enqueuer(store)
    with conn.transaction():
        yield enqueuer
        committed = _committing(store, enqueuer.queued, kicker)
    if not committed:
        return

    @contextmanager
    def same_connection() -> Iterator[ProducerStore]:
        """The app's connection, idle since its commit, each statement a transaction of its
        own (one round trip, not BEGIN, statement, COMMIT); its autocommit (off, as this
        form requires) given back after."""
        conn.autocommit = True
        try:
            yield store
        finally:
            conn.autocommit = False

    kick_committed(committed, kicker, same_connection, now=now(clock))


def _committing(store: ProducerStore, queued: list[QueuedJob], kicker: Kicker) -> list[QueuedJob]:
    """The jobs the app's transaction is about to commit, read in it just before its
    COMMIT: a savepoint the app rolled back may have taken some of them away, and by now
    every savepoint is closed, so what exists is what the COMMIT makes durable. Read
    there, not after the commit in a transaction of its own, it costs one round trip,
    not three. Nothing to read without jobs, or for a kicker that kicks nothing."""
    if not queued or isinstance(kicker, NoKicker):
        return queued
    return store.committed_among([job.id for job in queued])


@schema_advice  # no schema: say to migrate
def enqueue_and_kick(payload: Any, *, task: str, **options: Unpack[ProducerOptions]) -> int:
    """Insert and commit one job on one of the producer's lingering connections, then kick.

    Returns its id once the job is committed. Concurrent calls from threads share
    a few connections and may share one commit (`pgkick.producer.group_commit`); each
    connection is reused by the next call and closed PGKICK_PRODUCER_LINGER_MS
    after its last one (see `pgkick.connections.pool`). The options (queue, run_at or
    delay, max_attempts, `priority` (-100..100, higher first), `group` (one job of a
    group runs at a time), `unique_key` (a live job with the key is returned, nothing
    written)) are `EnqueueOptions`: README.
    """
    dsn, kicker, clock, job_options = where_to_commit(options)
    plan = EnqueuePlan.build(payload, task, job_options)  # bad input fails before anything connects
    kicker = kicker or default_kicker()  # and so does a bad kicker setting
    plan = plan.reserving(kicker, clock)
    if plan.spec.after:
        return _enqueue_after(plan, dsn, kicker, clock)
    if plan.unique:
        return _enqueue_unique(plan, dsn, kicker, clock)
    committer = group_commit.group_for(_producer_pool(dsn), clock)  # threads share commits
    job, must_kick = committer.insert_and_reserve(
        plan.spec, reserve=plan.reserve, pending=config.app_settings().kick_pending
    )
    # A job not due when planned reserved nothing: by the commit it may be due (a delay
    # shorter than the enqueue itself), so kick_committed reserves it then (None) rather
    # than take it for watched (it got neither a kick nor a wake-up: a review, 2026-12-05).
    reserved = {job.queue} if must_kick else (set() if plan.reserve else None)
    # "now" read after the commit, so a job due at once is never taken for a later one
    kick_committed(
        [job], kicker, lambda: producer_store(dsn, clock), reserved=reserved, now=now(clock)
    )
    return job.id


def _enqueue_unique(plan: EnqueuePlan, dsn: str | None, kicker: Kicker, clock: Clock) -> int:
    """enqueue_and_kick with a unique key: a kick is reserved only once the job is known
    to be new (EnqueuePlan says why)."""
    with producer_store(dsn, clock) as store:
        job, inserted = execute_sync(store, plan)
    if inserted:
        kick_committed([job], kicker, lambda: producer_store(dsn, clock), now=now(clock))
    return job.id


def _enqueue_after(plan: EnqueuePlan, dsn: str | None, kicker: Kicker, clock: Clock) -> int:
    """enqueue_and_kick of a job that waits for others: the parents' check, the insert and
    the link in one transaction of its own (not a group's commit); kicked only if it is
    ready at once (its parents all done)."""
    with producer_store(dsn, clock) as store:
        enqueuer = Enqueuer(store)
        job_id = enqueuer.enqueue_plan(plan)
    kick_committed(enqueuer.queued, kicker, lambda: producer_store(dsn, clock), now=now(clock))
    return job_id


@schema_advice  # no schema: say to migrate
def enqueue_many(jobs: Iterable[Mapping[str, Any]], **where: Unpack[CommitOptions]) -> list[int]:
    """Insert many jobs in one commit (pipelined chunks), then kick once per queue."""
    dsn, kicker, clock = commit_only("pgkick.enqueue_many", where)
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    with producer_store(dsn, clock) as store:
        enqueuer = Enqueuer(store)
        ids = enqueuer.enqueue_many(jobs)
    kick_committed(enqueuer.queued, kicker, lambda: producer_store(dsn, clock), now=now(clock))
    return ids


def _producer_pool(dsn: str | None) -> linger_pool.LingeringPool:
    settings = config.app_settings()
    return linger_pool.shared(dsn or settings.dsn(), settings.producer_linger)


@contextmanager
def producer_store(dsn: str | None, clock: Clock) -> Iterator[ProducerStore]:
    """A producer store on one of the process's pooled producer connections (the kick
    after a commit reserves and releases on it)."""
    with _producer_pool(dsn).connection() as conn:
        yield ProducerStore(conn, clock)
