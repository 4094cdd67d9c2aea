"""An async producer's round trip around its commit, and the kick after it.

Why apart from pgkick.aio: these are the rules of pgkick.producer.after_commit and
pgkick.kick.watch on an AsyncConnection (the reservation after the COMMIT, in the same
round trip; a committed job never followed by an exception; the kick in the loop's
executor, so a blocking boto3 call never stalls the loop), while pgkick.aio holds
the public forms that use them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pgkick import config
from pgkick.connections.db import AsyncConnection, AsyncCursor, DatabaseError, execute_async
from pgkick.errors import MisuseError
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer.after_commit import kick_committed
from pgkick.producer.enqueue import _now
from pgkick.store import queries
from pgkick.store.worker import Clock, JobStore, QueuedJob
from pgkick.validation import JobSpec

log = logging.getLogger("pgkick.aio")


async def insert(conn: AsyncConnection, clock: Clock, spec: JobSpec) -> AsyncCursor:
    return await execute_async(
        conn,
        clock,
        queries.JOB_INSERT,
        **spec.insert_params(),
    )


async def insert_and_reserve(
    conn: AsyncConnection, clock: Clock, spec: JobSpec, *, reserve: bool
) -> tuple[QueuedJob, bool]:
    """JobStore.insert_and_reserve on an AsyncConnection: BEGIN; INSERT; COMMIT; reserve,
    one round trip; the reservation after the COMMIT (see there why)."""
    inserted = commit = reserved = None
    try:
        async with conn.pipeline():
            await execute_async(conn, clock, queries.TRANSACTION_BEGIN)
            inserted = await insert(conn, clock, spec)
            commit = await execute_async(conn, clock, queries.TRANSACTION_COMMIT)
            if reserve:
                reserved = await execute_async(
                    conn,
                    clock,
                    queries.QUEUE_KICK_RESERVE,
                    queues=[spec.queue],
                    pending=config.app_settings().kick_pending,
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


async def reserve(
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
            conn,
            clock,
            queries.QUEUE_KICK_RESERVE,
            queues=ready,
            pending=config.app_settings().kick_pending,
        )
        return {row[0] for row in await cursor.fetchall()}
    except DatabaseError as exc:  # who watches is unknown: kick, as if nobody did
        log.warning("could not check who watches %s (%s); kicking", ready, exc)
        return set(ready)


async def kick(
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
def no_sync_store() -> Iterator[JobStore]:
    """The app's AsyncConnection cannot serve the kick thread: a failed kick's reservation
    then lapses by itself (PGKICK_KICK_PENDING_MS) instead of being released at once."""
    raise MisuseError("no synchronous connection for the app's AsyncConnection")
    yield
