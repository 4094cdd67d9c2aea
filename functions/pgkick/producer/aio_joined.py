"""`pgkick.aio.enqueue_in`: enqueue inside a transaction an asyncio app owns and commits
itself; kick after that commit. The asyncio twin of pgkick.producer.joined, same rules:

    pending = pgkick.aio.enqueue_in(conn)      # the app's AsyncConnection
    await conn.execute("INSERT INTO orders ...")
    await send_receipt.enqueue(pending, {"order": 42})
    await conn.commit()
    await pending.kick()                        # kicks the jobs that committed

Why a twin and not the sync form on the loop: the sync one needs a psycopg Connection and
would block the loop for each round trip. `kick()` refuses while the transaction is open,
re-reads which of its jobs committed (a rollback or a savepoint rolled back kicks nothing
for the jobs it took away), reserves the queues' kicks in a short transaction of its own,
then kicks off the loop (pgkick.producer.aio_after_commit). Once the jobs are committed it
never raises. As for `pgkick.aio.transaction`, a failed kick's reservation lapses by itself
(PGKICK_KICK_PENDING_MS): the kick's thread cannot use the app's AsyncConnection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Unpack

from pgkick.connections.aio_db import (
    AsyncConnection,
    async_state,
    async_transaction_failed,
    execute_async,
    is_async_connection,
)
from pgkick.connections.db import Clock, DatabaseError, is_connection, server_clock
from pgkick.errors import InvalidArgumentType, MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer.after_commit import ready_queues
from pgkick.producer.aio_after_commit import kick, no_sync_store, reserve
from pgkick.producer.aio_enqueue import AsyncEnqueuer
from pgkick.producer.options import EnqueueOptions
from pgkick.producer.plan import now
from pgkick.store import producer as statements
from pgkick.store import queries
from pgkick.store.producer import QueuedJob
from pgkick.store.statement import rows_async
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES

log = logging.getLogger("pgkick.aio")


class AsyncPendingJobs:
    """Jobs enqueued in an asyncio app's transaction, waiting for `await kick()` after its
    commit."""

    def __init__(
        self, conn: AsyncConnection, *, kicker: Kicker | None = None, clock: Clock = server_clock
    ) -> None:
        if not is_async_connection(conn):
            hint = "use pgkick.enqueue_in(conn)" if is_connection(conn) else "pass one"
            raise InvalidArgumentType(
                f"pgkick.aio.enqueue_in: needs a psycopg 3 AsyncConnection, got "
                f"{type(conn).__name__}; {hint}"
            )
        self.conn = conn
        self.kicker = kicker or default_kicker()  # a bad setting fails here, before any write
        self.clock = clock
        self._enqueuer = _JoinedEnqueuer(conn, clock, DEFAULT_MAX_PAYLOAD_BYTES)

    @property
    def ids(self) -> list[int]:
        """The ids enqueued so far (not yet kicked)."""
        return [job.id for job in self._enqueuer.queued]

    async def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int:
        """Insert one job in the connection's open transaction (same checks as everywhere)."""
        self._check_joinable()
        return await self._enqueuer.enqueue(payload, task=task, **options)

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Insert many jobs in the connection's open transaction, together or none."""
        self._check_joinable()
        return await self._enqueuer.enqueue_many(jobs)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """The calls inside written together or not at all, in the app's transaction (a
        workflow's levels: `Workflow.enqueue_with_async`)."""
        self._check_joinable()
        async with self._enqueuer.savepoint():
            yield

    async def kick(self, via: AsyncConnection | None = None) -> list[int]:
        """After the app's commit: kick the queues of the jobs that committed; their ids.

        `via`: another AsyncConnection to re-read on (the app's went back to a pool). Raises
        only while the transaction is still open on the connection it checks; jobs it
        cannot see committed are kept for the next kick() (after a rollback: discard())."""
        conn = via or self.conn
        if not async_state(conn)[0]:
            raise MisuseError(
                "pgkick: kick() called while the transaction is still open; commit it first "
                "(a kick before the commit announces jobs no worker can see yet)"
            )
        jobs, self._enqueuer.queued = self._enqueuer.queued, []
        if not jobs:
            return []
        try:
            async with conn.transaction():
                among = statements.committed_among([job.id for job in jobs])
                committed = [QueuedJob._make(r) for r in await rows_async(conn, self.clock, among)]
        except DatabaseError as exc:  # cannot tell which committed: kick them all (a spare kick)
            log.warning("could not re-read the jobs just committed (%s); kicking", exc)
            committed = jobs
        except BaseException:  # cancelled: nothing kicked yet, so the next kick() sends them
            self._enqueuer.queued[:0] = jobs
            raise
        seen = {job.id for job in committed}
        if unseen := [job for job in jobs if job.id not in seen]:
            self._enqueuer.queued[:0] = unseen  # pgkick.producer.joined says why kept
            log.warning(
                "%s job(s) not committed yet (kick() before the app's commit? after a "
                "rollback, call discard()): kept for the next kick()",
                len(unseen),
            )
        if committed:
            reserved = await self._reserve(conn, committed)
            await kick(committed, self.kicker, no_sync_store, reserved, self.clock)
        return sorted(seen)

    def discard(self) -> None:
        """Forget the jobs (the app rolled back): nothing will be kicked for them."""
        self._enqueuer.queued = []

    async def _reserve(self, conn: AsyncConnection, jobs: list[QueuedJob]) -> set[str]:
        """The queues to kick, reserved in a short transaction of the connection's own (it is
        idle after the app's commit); all the ready ones if that fails (a spare kick)."""
        try:
            async with conn.transaction():
                return await reserve(conn, self.clock, jobs, self.kicker)
        except DatabaseError as exc:
            log.warning("could not reserve the kicks after the commit (%s); kicking", exc)
            ready = [] if isinstance(self.kicker, NoKicker) else ready_queues(jobs, now(self.clock))
            return set(ready)

    def _check_joinable(self) -> None:
        """Refuse a connection the jobs cannot join, before anything is written."""
        if async_transaction_failed(self.conn):
            raise MisuseError("pgkick: the connection's transaction has failed; roll it back first")
        idle, autocommit, _ = async_state(self.conn)
        if autocommit and idle:
            raise MisuseError(
                "pgkick.aio.enqueue_in: the connection is in autocommit with no transaction "
                "open, so each job would commit alone; open a transaction first "
                "(conn.transaction()), or use pgkick.aio.enqueue_and_kick"
            )


class _JoinedEnqueuer(AsyncEnqueuer):
    """The app's connection: a savepoint (a job with `after=`, enqueue_many) first opens the
    app's transaction on a connection that is not autocommit and has none open yet, else
    psycopg makes conn.transaction() a BEGIN ... COMMIT of its own, out of the app's
    rollback (pgkick.producer.joined's _JoinedStore, the same rule)."""

    def atomic(self) -> AbstractAsyncContextManager[Any]:
        return self._joined()

    @asynccontextmanager
    async def _joined(self) -> AsyncIterator[None]:
        idle, autocommit, _ = async_state(self.conn)
        if idle and not autocommit:
            await execute_async(self.conn, self.clock, queries.TRANSACTION_JOIN)
        async with self.conn.transaction():
            yield


def enqueue_in(
    conn: AsyncConnection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> AsyncPendingJobs:
    """Join the app's transaction on its AsyncConnection; `await .kick()` after it commits."""
    return AsyncPendingJobs(conn, kicker=kicker, clock=clock)
