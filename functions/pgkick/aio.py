"""pgkick for asyncio apps (FastAPI, Starlette, aiohttp, Django's async views).

The same promises as the synchronous producer (`pgkick.producer`), on psycopg's
AsyncConnection: input is checked by the same `pgkick.validation` before
anything is sent; a kick goes out only after the job's transaction committed,
and nothing after a rollback; the queue's kick is reserved after the commit
(`queue_kick_reserve`), so a worker already draining it is not kicked again.

Why kicks go through a thread: the Lambda kicker is boto3, which blocks on its
HTTP call (tens of milliseconds, seconds on a retry). `asyncio.to_thread` runs
the kick and any wake-up booking in the loop's default executor, so other tasks
keep running meanwhile; the coroutine returns once the kick was sent (or failed
and was logged: as in the synchronous form, a failed kick never raises).

    job_id = await pgkick.aio.enqueue_and_kick({"to": "a@b.c"}, task="send_email")

    async with pgkick.aio.transaction(conn) as jobs:   # the app's AsyncConnection
        await conn.execute("INSERT INTO orders ...")
        await jobs.enqueue({"order": 42}, task="send_receipt")
    # committed here, then kicked; an exception inside rolls back and kicks nothing
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from pgkick import aio_pool, config, queries
from pgkick.db import AsyncConnection, AsyncCursor, DatabaseError, async_state, execute_async
from pgkick.kick import Kicker, NoKicker
from pgkick.kickers import default_kicker
from pgkick.producer import INSERT_CHUNK, _now, _producer_store, _spec, kick_committed
from pgkick.store import Clock, JobStore, QueuedJob, server_clock
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES, JobSpec, job_spec

log = logging.getLogger("pgkick.aio")
# Unique keys take the synchronous forms for now: the duplicate check is a second
# statement (pgkick.unique) not yet written for an AsyncConnection.
UNIQUE_NOT_YET = "not supported by pgkick.aio yet; use pgkick.enqueue_and_kick or enqueue_many"


class AsyncEnqueuer:
    """Inserts jobs on one AsyncConnection; remembers them so they are kicked after commit."""

    def __init__(self, conn: AsyncConnection, clock: Clock, max_payload_bytes: int) -> None:
        self.conn = conn
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes
        self.queued: list[QueuedJob] = []

    async def enqueue(
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
        )
        row = await (await _insert(self.conn, self.clock, spec)).fetchone()
        assert row is not None
        self.queued.append(QueuedJob._make(row))
        return self.queued[-1].id

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Each mapping holds enqueue's arguments; all validated before any is sent."""
        specs = [_spec(job, self.max_payload_bytes, index) for index, job in enumerate(jobs)]
        for index, spec in enumerate(specs):
            if spec.unique_key is not None:  # before anything is sent
                raise ValueError(f"jobs[{index}]: unique_key: {UNIQUE_NOT_YET}")
        ids: list[int] = []
        for chunk in itertools.batched(specs, INSERT_CHUNK):
            cursor = await execute_async(
                self.conn,
                self.clock,
                queries.JOB_INSERT_MANY,
                queues=[s.queue for s in chunk],
                tasks=[s.task for s in chunk],
                payloads=[s.payload_json for s in chunk],
                run_ats=[s.run_at for s in chunk],
                delays=[s.delay.total_seconds() for s in chunk],
                max_attempts=[s.max_attempts for s in chunk],
                priorities=[s.priority for s in chunk],
                groups=[s.group for s in chunk],
            )
            inserted = [QueuedJob._make(row) for row in await cursor.fetchall()]
            self.queued.extend(inserted)
            ids.extend(job.id for job in inserted)
        return ids


async def enqueue_and_kick(
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
) -> int:
    """Insert and commit one job on one of this loop's lingering connections, then kick."""
    spec = job_spec(
        payload,
        task=task,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        priority=priority,
        group=group,
    )  # bad input fails before anything connects
    kicker = kicker or default_kicker()  # and so does a bad kicker setting
    dsn = dsn or config.database_url()
    ready = spec.run_at <= _now(clock) if spec.run_at else spec.delay <= timedelta(0)
    ready = ready and not isinstance(kicker, NoKicker)  # it would reserve a kick never sent
    async with _pool(dsn).connection() as conn:
        job, must_kick = await _insert_and_reserve(conn, clock, spec, reserve=ready)
    await _kick(
        [job],
        kicker,
        lambda: _producer_store(dsn, clock),
        {job.queue} if must_kick else set(),
        clock,
    )
    return job.id


async def enqueue_many(
    jobs: Iterable[Mapping[str, Any]],
    *,
    dsn: str | None = None,
    kicker: Kicker | None = None,
    clock: Clock = server_clock,
) -> list[int]:
    """Insert many jobs in one commit, then kick once per queue; a bad job sends nothing."""
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    dsn = dsn or config.database_url()
    async with _pool(dsn).connection() as conn:
        enqueuer = AsyncEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)
        async with conn.transaction():
            ids = await enqueuer.enqueue_many(jobs)
        reserved = await _reserve(conn, clock, enqueuer.queued, kicker)
    await _kick(enqueuer.queued, kicker, lambda: _producer_store(dsn, clock), reserved, clock)
    return ids


@asynccontextmanager
async def transaction(
    conn: AsyncConnection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> AsyncIterator[AsyncEnqueuer]:
    """Enqueue inside the app's own transaction; kick once it has committed, never before."""
    idle, autocommit, _ = async_state(conn)
    if not idle or autocommit:
        raise RuntimeError(
            "pgkick.aio.transaction() must own the transaction: pass an AsyncConnection with "
            "autocommit off and no transaction in progress (commit or roll back first)"
        )
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    enqueuer = AsyncEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)
    async with conn.transaction():
        yield enqueuer
    if not enqueuer.queued:
        return
    committed = enqueuer.queued
    try:  # a savepoint the app rolled back may have taken some of them away
        async with conn.transaction():
            cursor = await execute_async(
                conn, clock, queries.JOB_COMMITTED_AMONG, ids=[j.id for j in enqueuer.queued]
            )
            committed = [QueuedJob._make(row) for row in await cursor.fetchall()]
    except DatabaseError as exc:
        log.warning("could not re-read the jobs just committed (%s)", exc)
    async with conn.transaction():  # its own short transaction, as the producer's
        reserved = await _reserve(conn, clock, committed, kicker)
    await _kick(committed, kicker, _no_sync_store, reserved, clock)


async def _insert(conn: AsyncConnection, clock: Clock, spec: JobSpec) -> AsyncCursor:
    return await execute_async(
        conn,
        clock,
        queries.JOB_INSERT,
        **spec.insert_params(),
    )


async def _insert_and_reserve(
    conn: AsyncConnection, clock: Clock, spec: JobSpec, *, reserve: bool
) -> tuple[QueuedJob, bool]:
    """JobStore.insert_and_reserve on an AsyncConnection: BEGIN; INSERT; COMMIT; reserve,
    one round trip; the reservation after the COMMIT (see there why)."""
    inserted = commit = reserved = None
    try:
        async with conn.pipeline():
            await execute_async(conn, clock, queries.TRANSACTION_BEGIN)
            inserted = await _insert(conn, clock, spec)
            commit = await execute_async(conn, clock, queries.TRANSACTION_COMMIT)
            if reserve:
                reserved = await execute_async(
                    conn,
                    clock,
                    queries.QUEUE_KICK_RESERVE,
                    queues=[spec.queue],
                    pending=config.kick_pending(),
                )
    except DatabaseError as exc:
        row = await _committed_row(inserted, commit) if reserve else None
        if row is None:
            raise  # the insert or its commit failed: nothing was committed
        log.warning("job %s committed; kick check failed (%s), kicking", row[0], exc)
        return QueuedJob._make(row), True
    assert inserted is not None
    row = await inserted.fetchone()
    assert row is not None
    return QueuedJob._make(row), bool(reserved is not None and await reserved.fetchall())


async def _committed_row(
    inserted: AsyncCursor | None, commit: AsyncCursor | None
) -> tuple[Any, ...] | None:
    """The insert's row if it ran and its COMMIT succeeded before a later statement failed."""
    if inserted is None or commit is None or commit.statusmessage != "COMMIT":
        return None
    try:
        row = await inserted.fetchone()
    except DatabaseError:
        return None
    return tuple(row) if row is not None else None


async def _reserve(
    conn: AsyncConnection, clock: Clock, jobs: list[QueuedJob], kicker: Kicker
) -> set[str]:
    """The ready queues whose kick this caller must send; all of them if that is unknown."""
    if isinstance(kicker, NoKicker):
        return set()
    ready = sorted({job.queue for job in jobs if job.run_at <= _now(clock)})
    if not ready:
        return set()
    try:
        cursor = await execute_async(
            conn, clock, queries.QUEUE_KICK_RESERVE, queues=ready, pending=config.kick_pending()
        )
        return {row[0] for row in await cursor.fetchall()}
    except DatabaseError as exc:  # who watches is unknown: kick, as if nobody did
        log.warning("could not check who watches %s (%s); kicking", ready, exc)
        return set(ready)


async def _kick(
    jobs: list[QueuedJob],
    kicker: Kicker,
    store_for: Callable[[], AbstractContextManager[JobStore]],
    reserved: set[str],
    clock: Clock,
) -> None:
    """kick_committed in the loop's executor: a blocking kicker never stalls the loop."""
    if isinstance(kicker, NoKicker) or (
        not reserved and all(j.run_at <= _now(clock) for j in jobs)
    ):
        return  # nothing to send: no thread hop
    await asyncio.to_thread(
        kick_committed, jobs, kicker, store_for, reserved=reserved, now=_now(clock)
    )


@contextmanager
def _no_sync_store() -> Iterator[JobStore]:
    """The app's AsyncConnection cannot serve the kick thread: a failed kick's reservation
    then lapses by itself (PGKICK_KICK_PENDING_MS) instead of being released at once."""
    raise RuntimeError("no synchronous connection for the app's AsyncConnection")
    yield


def _pool(dsn: str) -> aio_pool.AsyncLingeringPool:
    return aio_pool.shared(dsn, config.producer_linger())


__all__ = ["AsyncEnqueuer", "enqueue_and_kick", "enqueue_many", "transaction"]
