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

    pending = pgkick.aio.enqueue_in(conn)              # a transaction the app has open
    await pending.enqueue({"order": 42}, task="send_receipt")
    await conn.commit()
    await pending.kick()                               # kicks the jobs that committed

A job's result is awaited with `pgkick.wait_async(job_id, timeout=...)` (pgkick.tasks:
the layers keep it out of this module), the twin of `pgkick.wait`.

`unique_key=` works in every form as in the synchronous ones (pgkick.store.unique: the
same statements): a live job holding the key is answered, nothing is written,
and it is not kicked again; in `enqueue_many` a duplicate is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Unpack

from pgkick import config
from pgkick.connections import aio_pool
from pgkick.connections.aio_db import AsyncConnection, async_state
from pgkick.connections.db import Clock, server_clock
from pgkick.connections.schema_advice import schema_advice
from pgkick.errors import MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer.aio_after_commit import (
    commit_despite_cancel,
    kick,
    no_sync_store,
    reserve,
    reserve_despite_cancel,
    reserve_in_autocommit,
    transaction_despite_cancel,
)
from pgkick.producer.aio_enqueue import AsyncEnqueuer
from pgkick.producer.aio_joined import AsyncPendingJobs, enqueue_in
from pgkick.producer.enqueue import producer_store
from pgkick.producer.options import (
    CommitOptions,
    ProducerOptions,
    check_connection,
    commit_only,
    where_to_commit,
)
from pgkick.producer.plan import (
    EnqueuePlan,
    execute_async,
)
from pgkick.store import producer as statements
from pgkick.store.producer import QueuedJob
from pgkick.store.statement import rows_async
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES

log = logging.getLogger("pgkick.aio")


@schema_advice  # no schema: say to migrate
async def enqueue_and_kick(payload: Any, *, task: str, **options: Unpack[ProducerOptions]) -> int:
    """Insert and commit one job on one of this loop's lingering connections, then kick
    (with `unique_key`: a live job holding it is answered, nothing written or kicked)."""
    dsn, kicker, clock, job_options = where_to_commit(options)
    plan = EnqueuePlan.build(payload, task, job_options)  # bad input fails before anything connects
    kicker = kicker or default_kicker()  # and so does a bad kicker setting
    plan = plan.reserving(kicker, clock)
    dsn = dsn or config.app_settings().dsn()
    if plan.spec.after:  # its own transaction, kicked only if ready at once
        async with _pool(dsn).connection() as conn:
            enqueuer = AsyncEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)
            job_id, cancelled = await commit_despite_cancel(enqueuer.enqueue_plan(plan))
            reserved, cancelled = await reserve_despite_cancel(
                partial(reserve, conn, clock, enqueuer.queued, kicker),
                enqueuer.queued, kicker, clock, cancelled,
            )  # fmt: skip
        store_for = partial(producer_store, dsn, clock)
        await kick(enqueuer.queued, kicker, store_for, reserved, clock, cancelled)
        return job_id
    async with _pool(dsn).connection() as conn:
        # Each statement its own transaction: the INSERT (with a unique key, its steps:
        # pgkick.store.unique), then the reservation after its commit, as the synchronous
        # lone job does (ProducerStore.insert_and_reserve says why not a pipeline).
        (job, inserted), cancelled = await commit_despite_cancel(execute_async(conn, clock, plan))
        if not inserted:  # a live job held its key: nothing written, nothing to kick
            if cancelled is not None:
                raise cancelled
            return job.id
        reserved, cancelled = await reserve_despite_cancel(
            partial(reserve, conn, clock, [job], kicker), [job], kicker, clock, cancelled
        )
    await kick([job], kicker, partial(producer_store, dsn, clock), reserved, clock, cancelled)
    return job.id


@schema_advice  # no schema: say to migrate
async def enqueue_many(
    jobs: Iterable[Mapping[str, Any]], **where: Unpack[CommitOptions]
) -> list[int]:
    """Insert many jobs in one commit, then kick once per queue; a bad job sends nothing."""
    commit_only("pgkick.aio.enqueue_many", where)  # a job option here: refused, not dropped
    return await commit_and_kick(lambda enqueuer: enqueuer.enqueue_many(jobs), **where)


async def commit_and_kick[T](
    fill: Callable[[AsyncEnqueuer], Awaitable[T]], **where: Unpack[CommitOptions]
) -> T:
    """Run `fill` on an enqueuer in one transaction of its own on one of this loop's
    lingering connections, commit, then kick once per queue of the jobs it left ready
    (the async form of `pgkick.Workflow.enqueue` builds on it); an exception rolls back
    and kicks nothing."""
    dsn, kicker, clock = commit_only("pgkick.aio.commit_and_kick", where)
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    dsn = dsn or config.app_settings().dsn()
    async with _pool(dsn).connection() as conn:
        enqueuer = AsyncEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)
        async with transaction_despite_cancel(conn) as committing:
            result = await fill(enqueuer)
        reserved, cancelled = await reserve_despite_cancel(
            partial(reserve, conn, clock, enqueuer.queued, kicker),
            enqueuer.queued, kicker, clock, committing.cancelled,
        )  # fmt: skip
    store_for = partial(producer_store, dsn, clock)
    await kick(enqueuer.queued, kicker, store_for, reserved, clock, cancelled)
    return result


@asynccontextmanager
async def transaction(
    conn: AsyncConnection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> AsyncIterator[AsyncEnqueuer]:
    """Enqueue inside the app's own transaction; kick once it has committed, never before."""
    check_connection("pgkick.aio.transaction", conn, asyncio=True)
    idle, autocommit, _ = async_state(conn)
    if not idle or autocommit:
        raise MisuseError(
            "pgkick.aio.transaction() must own the transaction: pass an AsyncConnection with "
            "autocommit off and no transaction in progress (commit or roll back first)"
        )
    kicker = kicker or default_kicker()  # a bad setting fails here, before anything is written
    enqueuer = AsyncEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)
    committed: list[QueuedJob] = []
    async with transaction_despite_cancel(conn) as committing:
        yield enqueuer
        if enqueuer.queued and not isinstance(kicker, NoKicker):  # else nothing to kick
            # Read in the app's transaction just before its COMMIT (pgkick.producer.enqueue's
            # _committing says why): a savepoint the app rolled back may have taken some.
            among = statements.committed_among([j.id for j in enqueuer.queued])
            committed = [QueuedJob._make(row) for row in await rows_async(conn, clock, among)]
    if not committed:
        if committing.cancelled is not None:
            raise committing.cancelled
        return
    reserved, cancelled = await reserve_despite_cancel(
        partial(reserve_in_autocommit, conn, clock, committed, kicker),
        committed, kicker, clock, committing.cancelled,
    )  # fmt: skip
    await kick(committed, kicker, no_sync_store, reserved, clock, cancelled)


def _pool(dsn: str) -> aio_pool.AsyncLingeringPool:
    return aio_pool.shared(dsn, config.app_settings().producer_linger)


__all__ = [
    "AsyncEnqueuer",
    "AsyncPendingJobs",
    "commit_and_kick",
    "enqueue_and_kick",
    "enqueue_in",
    "enqueue_many",
    "transaction",
]
