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
from datetime import UTC, datetime, timedelta
from typing import Any

from pgkick import config
from pgkick.connections import linger  # noqa: F401 (tests close producer.linger)
from pgkick.connections import pool as linger_pool
from pgkick.connections.db import idle_outside_transaction
from pgkick.connections.schema_advice import schema_advice
from pgkick.errors import InvalidArgumentType, MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer import group_commit
from pgkick.producer.after_commit import kick_committed, one_line
from pgkick.producer.after_commit import stats as stats  # tests and operators read producer.stats
from pgkick.store.worker import Clock, Connection, JobStore, QueuedJob, server_clock
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES, JobSpec, job_spec

log = logging.getLogger("pgkick.producer")
INSERT_CHUNK = 5_000  # measured: 100,000 jobs insert fastest in chunks of 5,000-10,000


class Enqueuer:
    """Inserts jobs through one store; remembers them so they are kicked after commit."""

    def __init__(self, store: JobStore, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES):
        self.store = store
        self.max_payload_bytes = max_payload_bytes
        self.queued: list[QueuedJob] = []

    @schema_advice  # no schema: say to migrate
    def enqueue(
        self,
        payload: Any,
        *,
        task: str,
        queue: str = "default",
        run_at: datetime | None = None,
        delay: float | timedelta | None = None,
        max_attempts: int = 5,
        priority: int = 0,
        group: str | None = None,
        unique_key: str | None = None,
    ) -> int:
        spec = job_spec(
            payload,
            task=task,
            queue=queue,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            max_payload_bytes=self.max_payload_bytes,
            priority=priority,
            group=group,
            unique_key=unique_key,
        )
        return self.enqueue_spec(spec)

    def enqueue_spec(self, spec: JobSpec) -> int:
        """Insert one job that has been validated already (or find the live one holding its
        unique key: that one is not kicked again)."""
        if spec.unique_key is not None:
            job, inserted = self.store.insert_unique(spec)
            if inserted:
                self.queued.append(job)
            return job.id
        job = self.store.insert(spec)
        self.queued.append(job)
        return job.id

    @schema_advice  # no schema: say to migrate
    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Each mapping holds enqueue's arguments (payload, task, queue, ...); one commit.

        Validated chunk by chunk while the server inserts the chunk before; a bad
        job anywhere raises (naming jobs[i]) and rolls back the chunks already sent.
        """
        chunks = (
            [_spec(job, self.max_payload_bytes, index) for index, job in chunk]
            for chunk in itertools.batched(enumerate(jobs), INSERT_CHUNK)
        )
        every, inserted = self.store.insert_many_unique(chunks)
        self.queued.extend(inserted)  # a skipped duplicate is not kicked again
        return [job.id for job in every]


_FIELDS = frozenset(
    {"payload", "task", "queue", "run_at", "delay", "max_attempts"}
    | {"priority", "group", "unique_key"}
)


def _spec(job: Mapping[str, Any], max_bytes: int, index: int) -> JobSpec:
    try:
        if not isinstance(job, Mapping):
            raise InvalidArgumentType(
                f"must be a mapping of enqueue's arguments, got {type(job).__name__}"
            )
        if not job.keys() <= _FIELDS:
            raise InvalidArgumentType(f"unknown fields {sorted(set(job) - _FIELDS)}")
        if "payload" not in job or "task" not in job:
            raise InvalidArgumentType("needs payload and task")
        return job_spec(
            job["payload"],
            task=job["task"],
            queue=job.get("queue", "default"),
            run_at=job.get("run_at"),
            delay=job.get("delay"),
            max_attempts=job.get("max_attempts", 5),
            max_payload_bytes=max_bytes,
            priority=job.get("priority", 0),
            group=job.get("group"),
            unique_key=job.get("unique_key"),
        )
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"jobs[{index}]: {exc}") from None


@contextmanager
def transaction(
    conn: Connection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> Iterator[Enqueuer]:
    """Enqueue inside the app's own transaction; kick once it has committed, never before."""
    if not idle_outside_transaction(conn):
        raise MisuseError(
            "pgkick.transaction() must own the transaction: pass a connection with "
            "autocommit off and no transaction in progress (commit or roll back first)"
        )
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    store = JobStore(conn, clock)
    enqueuer = Enqueuer(store)
    with conn.transaction():
        yield enqueuer
    if not enqueuer.queued:
        return
    try:  # a savepoint the app rolled back may have taken some of them away
        with store.transaction():
            committed = store.committed_among([job.id for job in enqueuer.queued])
    except Exception as exc:
        log.warning("could not re-read the jobs just committed (%s)", one_line(exc))
        committed = enqueuer.queued

    @contextmanager
    def same_connection() -> Iterator[JobStore]:
        with store.transaction():
            yield store

    kick_committed(committed, kicker, same_connection, now=_now(clock))


@schema_advice  # no schema: say to migrate
def enqueue_and_kick(
    payload: Any,
    *,
    task: str,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = 5,
    dsn: str | None = None,
    kicker: Kicker | None = None,
    clock: Clock = server_clock,
    priority: int = 0,
    group: str | None = None,
    unique_key: str | None = None,
) -> int:
    """Insert and commit one job on one of the producer's lingering connections, then kick.

    Returns its id once the job is committed. Concurrent calls from threads share
    a few connections and may share one commit (`pgkick.producer.group_commit`); each
    connection is reused by the next call and closed PGKICK_PRODUCER_LINGER_MS
    after its last one (see `pgkick.connections.pool`).
    `priority` (-100..100, higher first), `group` (one job of a group runs at a time)
    and `unique_key` (a live job with the key is returned, nothing written): README.
    """
    spec = job_spec(
        payload,
        task=task,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        priority=priority,
        group=group,
        unique_key=unique_key,
    )  # bad input fails before anything connects
    kicker = kicker or default_kicker()  # and so does a bad kicker setting
    if spec.unique_key is not None:
        return _enqueue_unique(spec, dsn, kicker, clock)
    ready = spec.run_at <= _now(clock) if spec.run_at else spec.delay <= timedelta(0)
    ready = ready and not isinstance(kicker, NoKicker)  # it would reserve a kick never sent
    committer = group_commit.group_for(_producer_pool(dsn), clock)  # threads share commits
    job, must_kick = committer.insert_and_reserve(
        spec, reserve=ready, pending=config.app_settings().kick_pending
    )
    reserved = {job.queue} if must_kick else set()
    # "now" read after the commit, so a job due at once is never taken for a later one
    kick_committed(
        [job], kicker, lambda: _producer_store(dsn, clock), reserved=reserved, now=_now(clock)
    )
    return job.id


def _enqueue_unique(spec: JobSpec, dsn: str | None, kicker: Kicker, clock: Clock) -> int:
    """enqueue_and_kick with a unique key: a kick is reserved only once the job is known
    to be new (a duplicate reserving one would make other producers wait for a kick
    never sent)."""
    with _producer_store(dsn, clock) as store:
        job, inserted = store.insert_unique(spec)
    if inserted:
        kick_committed([job], kicker, lambda: _producer_store(dsn, clock), now=_now(clock))
    return job.id


@schema_advice  # no schema: say to migrate
def enqueue_many(
    jobs: Iterable[Mapping[str, Any]],
    *,
    dsn: str | None = None,
    kicker: Kicker | None = None,
    clock: Clock = server_clock,
) -> list[int]:
    """Insert many jobs in one commit (pipelined chunks), then kick once per queue."""
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    with _producer_store(dsn, clock) as store:
        enqueuer = Enqueuer(store)
        ids = enqueuer.enqueue_many(jobs)
    kick_committed(enqueuer.queued, kicker, lambda: _producer_store(dsn, clock), now=_now(clock))
    return ids


def _now(clock: Clock) -> datetime:
    """The clock's instant, or this machine's (the server's now() is not known here)."""
    return clock() or datetime.now(UTC)


def _producer_pool(dsn: str | None) -> linger_pool.LingeringPool:
    settings = config.app_settings()
    return linger_pool.shared(dsn or settings.dsn(), settings.producer_linger)


@contextmanager
def _producer_store(dsn: str | None, clock: Clock) -> Iterator[JobStore]:
    with _producer_pool(dsn).connection() as conn:
        yield JobStore(conn, clock)
