"""An async producer's kick after its commit: the reservation, then the kick off the loop.

Why apart from pgkick.aio: these are the rules of pgkick.producer.after_commit and
pgkick.kick.watch on an AsyncConnection (a committed job never followed by an
exception; the kick in the loop's executor, so a blocking boto3 call never stalls
the loop), while pgkick.aio holds the public forms that use them. The round trip
around the commit is the synchronous producer's own plan (pgkick.producer.plan).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from pgkick import config
from pgkick.connections.db import AsyncConnection, Clock, DatabaseError
from pgkick.errors import MisuseError
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer.after_commit import kick_committed, ready_queues
from pgkick.producer.plan import now
from pgkick.store import producer as statements
from pgkick.store.producer import ProducerStore, QueuedJob
from pgkick.store.statement import rows_async

log = logging.getLogger("pgkick.aio")


async def reserve(
    conn: AsyncConnection, clock: Clock, jobs: list[QueuedJob], kicker: Kicker
) -> set[str]:
    """The ready queues whose kick this caller must send; all of them if that is unknown."""
    ready = [] if isinstance(kicker, NoKicker) else ready_queues(jobs, now(clock))
    if not ready:
        return set()
    statement = statements.reserve_kicks(ready, config.app_settings().kick_pending)
    try:
        return {row[0] for row in await rows_async(conn, clock, statement)}
    except DatabaseError as exc:  # who watches is unknown: kick, as if nobody did
        log.warning("could not check who watches %s (%s); kicking", ready, exc)
        return set(ready)


async def reserve_despite_cancel(
    reserving: Awaitable[set[str]], jobs: list[QueuedJob], kicker: Kicker, clock: Clock
) -> tuple[set[str], asyncio.CancelledError | None]:
    """The reservation after a commit, and the caller's cancellation if one came meanwhile.

    Why: the jobs are committed; a request timeout or a client gone that cancels the caller
    during the reservation left them reserved (or not) and never kicked, to wait for a sweep
    or the daily reaper (a review, 2026-12-05). Cancelled, the queues are taken as nobody
    watched (every ready one: at worst a spare kick); the caller kicks them, then lets the
    cancellation through (pgkick.aio). A kick already in its thread runs to its end anyway."""
    try:
        return await reserving, None
    except asyncio.CancelledError as cancelled:
        ready = set() if isinstance(kicker, NoKicker) else set(ready_queues(jobs, now(clock)))
        return ready, cancelled


async def reserve_in_autocommit(
    conn: AsyncConnection, clock: Clock, jobs: list[QueuedJob], kicker: Kicker
) -> set[str]:
    """reserve() on the app's connection, idle since its commit: one statement in
    autocommit (one round trip, not BEGIN, statement, COMMIT), the connection's autocommit
    (off, as pgkick.aio.transaction requires) given back after. Never raises, the jobs
    being committed: a connection that cannot switch means kick, as if nobody watched."""
    try:
        await conn.set_autocommit(True)
        try:
            return await reserve(conn, clock, jobs, kicker)
        finally:
            await conn.set_autocommit(False)
    except DatabaseError as exc:
        log.warning("could not reserve the kicks after the commit (%s); kicking", exc)
        return set() if isinstance(kicker, NoKicker) else set(ready_queues(jobs, now(clock)))


async def kick(
    jobs: list[QueuedJob],
    kicker: Kicker,
    store_for: Callable[[], AbstractContextManager[ProducerStore]],
    reserved: set[str],
    clock: Clock,
    cancelled: asyncio.CancelledError | None = None,
) -> None:
    """kick_committed in the loop's executor: a blocking kicker never stalls the loop. Then
    the caller's cancellation, if one came during the reservation (reserve_despite_cancel),
    once what the commit made is kicked."""
    if not isinstance(kicker, NoKicker) and (
        reserved or any(j.run_at > now(clock) for j in jobs)
    ):  # else nothing to send: no thread hop
        await asyncio.to_thread(
            kick_committed, jobs, kicker, store_for, reserved=reserved, now=now(clock)
        )
    if cancelled is not None:
        raise cancelled


@contextmanager
def no_sync_store() -> Iterator[ProducerStore]:
    """The app's AsyncConnection cannot serve the kick thread: a failed kick's reservation
    then lapses by itself (PGKICK_KICK_PENDING_MS) instead of being released at once."""
    raise MisuseError("no synchronous connection for the app's AsyncConnection")
    yield
