"""Enqueue inside a transaction the app owns and commits itself; kick after that commit.

Why: the most common place a job is born is inside the app's open transaction
(Django's `atomic()`, a SQLAlchemy session, a psycopg connection mid-transaction).
`pgkick.transaction(conn)` must own the transaction, so it cannot join one. Here
the jobs are inserted on the app's connection, inside its transaction, and
nothing is kicked until `kick()` is called after the app committed:

    pending = pgkick.enqueue_in(conn)          # conn: already in a transaction
    conn.execute("INSERT INTO orders ...")
    send_receipt.enqueue(pending, {"order": 42})
    conn.commit()
    pending.kick()                              # kicks the jobs that committed

Why it is hard to misuse: `kick()` refuses while the transaction is still open
(a kick before the commit announces rows no worker can see yet), and after the
commit it re-reads which of its jobs exist (job_committed_among): a rollback, or a
savepoint rolled back, kicks nothing for the jobs it took away. A second `kick()`
does nothing. Like every producer form, `kick()` never raises once the jobs are
committed (a failed kick is logged; the next wake-up runs them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Unpack

from pgkick.connections.db import (
    Clock,
    Connection,
    idle_outside_transaction,
    is_connection,
    no_transaction,
    server_clock,
    transaction_failed,
)
from pgkick.errors import InvalidArgumentType, MisuseError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker
from pgkick.producer.after_commit import kick_committed
from pgkick.producer.enqueue import Enqueuer
from pgkick.producer.options import EnqueueOptions
from pgkick.store.producer import ProducerStore

log = logging.getLogger("pgkick.joined")


class PendingJobs:
    """Jobs enqueued in the app's transaction, waiting for `kick()` after its commit."""

    def __init__(
        self, conn: Connection, *, kicker: Kicker | None = None, clock: Clock = server_clock
    ) -> None:
        if not is_connection(conn):
            from pgkick.connections.aio_db import is_async_connection  # an error path only

            asynchronous = is_async_connection(conn)
            hint = (
                "; for an AsyncConnection use pgkick.aio.enqueue_in(conn)" if asynchronous else ""
            )
            raise InvalidArgumentType(
                f"pgkick.enqueue_in: needs a psycopg 3 connection, got {type(conn).__name__}" + hint
            )
        self.conn = conn
        self.kicker = kicker or default_kicker()  # a bad setting fails here, before any write
        self.clock = clock
        self._enqueuer = Enqueuer(_JoinedStore(conn, clock))
        self._lock = threading.Lock()

    @property
    def ids(self) -> list[int]:
        """The ids enqueued so far (not yet kicked)."""
        return [job.id for job in self._enqueuer.queued]

    def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int:
        """Insert one job in the connection's open transaction (same checks as everywhere)."""
        self._check_joinable()
        return self._enqueuer.enqueue(payload, task=task, **options)

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Insert many jobs in the connection's open transaction."""
        self._check_joinable()
        return self._enqueuer.enqueue_many(jobs)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """The calls inside written together or not at all, in the app's transaction (a
        workflow's levels: Enqueuer.savepoint)."""
        self._check_joinable()
        with self._enqueuer.savepoint():
            yield

    def kick(self, via: Connection | None = None) -> list[int]:
        """After the app's commit: kick the queues of the jobs that committed; their ids.

        `via`: the connection to re-read on, when the app's own one is no longer usable
        (returned to a pool). Raises only while the app's transaction is still open on the
        connection it checks; jobs it cannot see committed are kept for the next kick()."""
        conn = via or self.conn
        if not no_transaction(conn):
            raise MisuseError(
                "pgkick: kick() called while the transaction is still open; commit it first "
                "(a kick before the commit announces jobs no worker can see yet)"
            )
        with self._lock:
            jobs, self._enqueuer.queued = self._enqueuer.queued, []
        if not jobs:
            return []
        store = ProducerStore(conn, self.clock)
        try:
            with store.transaction():
                committed = store.committed_among([job.id for job in jobs])
        except Exception as exc:  # cannot tell which committed: kick them all (a spare kick)
            log.warning("could not re-read the jobs just committed (%s); kicking", exc)
            committed = jobs
        seen = {job.id for job in committed}
        if unseen := [job for job in jobs if job.id not in seen]:
            # Not committed yet (kick() on another connection before the app's commit) or
            # rolled back: kept for the next kick(), which sends the ones that committed.
            # Dropped, a job committed after such a kick was never kicked (a review).
            with self._lock:
                self._enqueuer.queued[:0] = unseen
            log.warning(
                "%s job(s) not committed yet (kick() before the app's commit? after a "
                "rollback, call discard()): kept for the next kick()",
                len(unseen),
            )
        if committed:
            kick_committed(committed, self.kicker, lambda: _on(store), now=self._now())
        return sorted(job.id for job in committed)

    def discard(self) -> None:
        """Forget the jobs (the app rolled back): nothing will be kicked for them."""
        with self._lock:
            self._enqueuer.queued = []

    def _check_joinable(self) -> None:
        """Refuse a connection the jobs cannot join (pgkick's statements go in as they come:
        _JoinedStore opens the app's transaction before a savepoint, if none is open)."""
        if transaction_failed(self.conn):
            raise MisuseError("pgkick: the connection's transaction has failed; roll it back first")
        if self.conn.autocommit and no_transaction(self.conn):
            raise MisuseError(
                "pgkick.enqueue_in: the connection is in autocommit with no transaction open, "
                "so each job would commit alone; open a transaction first (conn.transaction()), "
                "or use pgkick.enqueue_and_kick"
            )

    def _now(self) -> datetime:
        return self.clock() or datetime.now(UTC)


class _JoinedStore(ProducerStore):
    """The app's connection: a savepoint (a job with `after=`, enqueue_many: their statements
    together or none) opens the app's transaction first on a connection that is not
    autocommit and has none open yet. psycopg makes conn.transaction() a BEGIN ... COMMIT of
    its own there, and the app's rollback would not take those jobs away. Joined only then,
    after the jobs' checks: a plain enqueue's one statement opens it as any statement does."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if idle_outside_transaction(self.conn):
            self.join_transaction()
        with super().transaction():
            yield


@contextmanager
def _on(store: ProducerStore) -> Iterator[ProducerStore]:
    """The store, inside a short transaction of its own (reservations are written)."""
    with store.transaction():
        yield store


def enqueue_in(
    conn: Connection, *, kicker: Kicker | None = None, clock: Clock = server_clock
) -> PendingJobs:
    """Join the app's open transaction on `conn`; call `.kick()` after it commits."""
    return PendingJobs(conn, kicker=kicker, clock=clock)
