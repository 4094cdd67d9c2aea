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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager

from pgkick import config
from pgkick.connections.aio_db import AsyncConnection
from pgkick.connections.db import Clock, DatabaseError
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
    reserving: Callable[[], Awaitable[set[str]]],
    jobs: list[QueuedJob],
    kicker: Kicker,
    clock: Clock,
    cancelled: asyncio.CancelledError | None = None,
) -> tuple[set[str], asyncio.CancelledError | None]:
    """The reservation after a commit, and the caller's cancellation if one came meanwhile
    (or during the commit: `cancelled`, from commit_despite_cancel).

    Why: the jobs are committed; a request timeout or a client gone that cancels the caller
    during the reservation left them reserved (or not) and never kicked, to wait for a sweep
    or the daily reaper (a review, 2026-12-05). Cancelled, the queues are taken as nobody
    watched (every ready one: at worst a spare kick); the caller kicks them, then lets the
    cancellation through (pgkick.aio). A kick already in its thread runs to its end anyway."""
    if cancelled is None:
        try:
            return await reserving(), None
        except asyncio.CancelledError as caught:
            cancelled = caught
    ready = set() if isinstance(kicker, NoKicker) else set(ready_queues(jobs, now(clock)))
    return ready, cancelled


async def commit_despite_cancel[T](
    work: Awaitable[T],
) -> tuple[T, asyncio.CancelledError | None]:
    """Run `work`, a round trip that commits, to its end though the caller is cancelled
    meanwhile; returns its result and that cancellation, to raise once the jobs are kicked.

    Why: cancelled inside psycopg during the INSERT or the COMMIT, the caller stopped
    waiting, psycopg asked the server to cancel, and the server had most often committed
    already: the job existed, and nobody kicked it (a review: 59 of 222 transactions
    cancelled at random). Shielded, the round trip ends (a few ms) and its jobs are kicked.
    A second cancel gives up waiting, and cancels the round trip too."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task), None
    except asyncio.CancelledError as cancelled:
        try:
            result = await task  # a second cancel of the caller cancels it
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # the caller asked to stop: say so, with why
            raise cancelled from error
        return result, cancelled


class Committing:
    """What transaction_despite_cancel learnt: the caller's cancellation during the COMMIT."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled: asyncio.CancelledError | None = None


@asynccontextmanager
async def transaction_despite_cancel(conn: AsyncConnection) -> AsyncIterator[Committing]:
    """`conn.transaction()`, its COMMIT run to its end though the caller is cancelled
    during it (commit_despite_cancel); a cancellation before the COMMIT rolls back as ever."""
    committing = Committing()
    transaction = conn.transaction()
    await transaction.__aenter__()
    try:
        yield committing
    except BaseException as exc:
        if not await transaction.__aexit__(type(exc), exc, exc.__traceback__):
            raise
        return
    _, committing.cancelled = await commit_despite_cancel(transaction.__aexit__(None, None, None))


async def reserve_in_autocommit(
    conn: AsyncConnection, clock: Clock, jobs: list[QueuedJob], kicker: Kicker
) -> set[str]:
    """reserve() on the app's connection, idle since its commit: one statement in
    autocommit (one round trip, not BEGIN, statement, COMMIT), the connection's autocommit
    (off, as pgkick.aio.transaction requires) given back after. Never raises, the jobs
    being committed: a connection that cannot switch means kick, as if nobody watched.

    The autocommit is given back apart: cancelled twice during the reservation, psycopg
    closes the connection and raises the CancelledError, which giving back the autocommit
    (a DatabaseError on a closed connection) replaced and this function took for a failed
    reservation: the caller returned normally, cancelled (a review, 2026-12-05)."""
    try:
        await conn.set_autocommit(True)
    except DatabaseError as exc:
        log.warning("could not reserve the kicks after the commit (%s); kicking", exc)
        return set() if isinstance(kicker, NoKicker) else set(ready_queues(jobs, now(clock)))
    try:
        return await reserve(conn, clock, jobs, kicker)  # never raises a DatabaseError
    finally:
        try:
            await conn.set_autocommit(False)
        except DatabaseError as exc:  # closed meanwhile: its autocommit matters no more
            log.warning("could not give back the connection's autocommit (%s)", exc)


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
    once what the commit made is kicked. Shielded: a cancel while the kick waited for a
    free thread took it off the executor's queue, and the jobs were never kicked (a review:
    4 of 229 transactions cancelled at random); now it runs whatever the caller does."""
    if not isinstance(kicker, NoKicker) and (
        reserved or any(j.run_at > now(clock) for j in jobs)
    ):  # else nothing to send: no thread hop
        await asyncio.shield(
            asyncio.to_thread(
                kick_committed, jobs, kicker, store_for, reserved=reserved, now=now(clock)
            )
        )
    if cancelled is not None:
        raise cancelled


@contextmanager
def no_sync_store() -> Iterator[ProducerStore]:
    """The app's AsyncConnection cannot serve the kick thread: a failed kick's reservation
    then lapses by itself (PGKICK_KICK_PENDING_MS) instead of being released at once."""
    raise MisuseError("no synchronous connection for the app's AsyncConnection")
    yield
