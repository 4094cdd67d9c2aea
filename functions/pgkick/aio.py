"""pgkick for asyncio apps (FastAPI, Starlette, aiohttp, Django's async views).

The same promises as the synchronous producer (`pgkick.producer.enqueue`), on psycopg's
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

`unique_key=` works in every form as in the synchronous ones (pgkick.store.unique: the
same statements): a live job holding the key is answered, nothing is written,
and it is not kicked again; in `enqueue_many` a duplicate is skipped.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from pgkick import config
from pgkick.connections import aio_pool
from pgkick.connections.db import AsyncConnection, DatabaseError, async_state, execute_async
from pgkick.connections.schema_advice import schema_advice
from pgkick.errors import MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer.aio_after_commit import (
    insert,
    insert_and_reserve,
    kick,
    no_sync_store,
    reserve,
)
from pgkick.producer.enqueue import INSERT_CHUNK, _now, _producer_store, _spec
from pgkick.store import queries, unique
from pgkick.store.worker import Clock, QueuedJob, server_clock
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES, JobSpec, job_spec

log = logging.getLogger("pgkick.aio")


class AsyncEnqueuer:
    """Inserts jobs on one AsyncConnection; remembers them so they are kicked after commit."""

    def __init__(self, conn: AsyncConnection, clock: Clock, max_payload_bytes: int) -> None:
        self.conn = conn
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes
        self.queued: list[QueuedJob] = []

    @schema_advice  # no schema: say to migrate
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
        if spec.unique_key is not None:  # the live holder is answered, and not kicked again
            held, inserted = await unique.insert_one_async(self.conn, self.clock, spec)
            if inserted:
                self.queued.append(QueuedJob._make(held))
            return held[0]
        row = await (await insert(self.conn, self.clock, spec)).fetchone()
        assert row is not None
        self.queued.append(QueuedJob._make(row))
        return self.queued[-1].id

    @schema_advice  # no schema: say to migrate
    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Each mapping holds enqueue's arguments; all validated before any is sent."""
        specs = [_spec(job, self.max_payload_bytes, index) for index, job in enumerate(jobs)]
        batch = unique.UniqueBatch()  # keyed jobs wait, deduplicated, for the plain ones
        every: dict[int, QueuedJob] = {}
        for chunk in itertools.batched(specs, INSERT_CHUNK):
            plain = batch.split(chunk)
            if not plain:
                continue
            params = unique.arrays(plain)
            cursor = await execute_async(self.conn, self.clock, queries.JOB_INSERT_MANY, **params)
            rows = await cursor.fetchall()
            for (index, _), row in zip(plain, rows, strict=True):
                every[index] = QueuedJob._make(row)
                self.queued.append(every[index])
        if batch.keyed:
            keyed, inserted = await batch.insert_async(self.conn, self.clock)
            every.update((index, QueuedJob._make(row)) for index, row in keyed.items())
            self.queued.extend(QueuedJob._make(row) for row in inserted)  # skipped: no kick
        return [every[index].id for index in range(len(specs))]


@schema_advice  # no schema: say to migrate
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
    unique_key: str | None = None,
) -> int:
    """Insert and commit one job on one of this loop's lingering connections, then kick
    (with `unique_key`: a live job holding it is answered, nothing written or kicked)."""
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
    dsn = dsn or config.app_settings().dsn()
    if spec.unique_key is not None:
        return await _enqueue_unique(spec, dsn, kicker, clock)
    ready = spec.run_at <= _now(clock) if spec.run_at else spec.delay <= timedelta(0)
    ready = ready and not isinstance(kicker, NoKicker)  # it would reserve a kick never sent
    async with _pool(dsn).connection() as conn:
        job, must_kick = await insert_and_reserve(conn, clock, spec, reserve=ready)
    await kick(
        [job],
        kicker,
        lambda: _producer_store(dsn, clock),
        {job.queue} if must_kick else set(),
        clock,
    )
    return job.id


async def _enqueue_unique(spec: JobSpec, dsn: str, kicker: Kicker, clock: Clock) -> int:
    """enqueue_and_kick with a unique key: each statement its own transaction (pgkick.store.unique
    says why the read-back must be a later one); a kick is reserved only for a new job."""
    async with _pool(dsn).connection() as conn:
        row, inserted = await unique.insert_one_async(conn, clock, spec)
        job = QueuedJob._make(row)
        reserved = await reserve(conn, clock, [job], kicker) if inserted else set()
    if inserted:
        await kick([job], kicker, lambda: _producer_store(dsn, clock), reserved, clock)
    return job.id


@schema_advice  # no schema: say to migrate
async def enqueue_many(
    jobs: Iterable[Mapping[str, Any]],
    *,
    dsn: str | None = None,
    kicker: Kicker | None = None,
    clock: Clock = server_clock,
) -> list[int]:
    """Insert many jobs in one commit, then kick once per queue; a bad job sends nothing."""
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    dsn = dsn or config.app_settings().dsn()
    async with _pool(dsn).connection() as conn:
        enqueuer = AsyncEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)
        async with conn.transaction():
            ids = await enqueuer.enqueue_many(jobs)
        reserved = await reserve(conn, clock, enqueuer.queued, kicker)
    await kick(enqueuer.queued, kicker, lambda: _producer_store(dsn, clock), reserved, clock)
    return ids


@asynccontextmanager
async def transaction(
    conn: AsyncConnection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> AsyncIterator[AsyncEnqueuer]:
    """Enqueue inside the app's own transaction; kick once it has committed, never before."""
    idle, autocommit, _ = async_state(conn)
    if not idle or autocommit:
        raise MisuseError(
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
        reserved = await reserve(conn, clock, committed, kicker)
    await kick(committed, kicker, no_sync_store, reserved, clock)


def _pool(dsn: str) -> aio_pool.AsyncLingeringPool:
    return aio_pool.shared(dsn, config.app_settings().producer_linger)


__all__ = ["AsyncEnqueuer", "enqueue_and_kick", "enqueue_many", "transaction"]
