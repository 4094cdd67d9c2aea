"""Enqueue on a SQLAlchemy session's connection; kick in its `after_commit`.

    from pgkick.contrib import sqlalchemy as pgkick_sa

    with Session(engine) as session, session.begin():
        session.add(Order(id=42))
        send_receipt.enqueue(pgkick_sa.jobs(session), {"order": 42})
    # committed: kicked now; rolled back: nothing is kicked

Why the session's own connection: the job commits or rolls back with the app's rows.
Why `after_commit`: it fires only once the DBAPI transaction committed, before the
connection goes back to the pool, so the committed jobs are re-read on it (a
`begin_nested()` savepoint rolled back takes its jobs away) and only those kicked.
`after_rollback` forgets them (not for a savepoint's), and so does the end of the outermost
transaction (a session closed without either). Needs the psycopg 3 driver (`postgresql+psycopg://`).
A session bound to a connection already in a transaction (`Session(bind=conn)` inside
`conn.begin()`) commits nothing itself, and SQLAlchemy fires no event after that
connection's commit: its jobs commit with it but start at the next wake-up (a warning says
so); use `pgkick.enqueue_in(conn.connection.driver_connection)` and `kick()` there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Unpack

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction, scoped_session

from pgkick.connections.db import is_connection, no_transaction
from pgkick.errors import InvalidArgumentType
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker
from pgkick.producer.joined import PendingJobs
from pgkick.validation import EnqueueOptions

log = logging.getLogger("pgkick.contrib.sqlalchemy")
_PENDING = "pgkick.pending"  # session.info key: this transaction's PendingJobs, one a kicker
_HOOKED = "pgkick.hooked"


class SessionJobs:
    """Where jobs go inside a session's current transaction."""

    def __init__(
        self, session: Session | scoped_session[Session], *, kicker: Kicker | None = None
    ) -> None:
        if isinstance(session, scoped_session):  # Flask-SQLAlchemy's db.session: the thread's
            session = session()
        if not isinstance(session, Session):
            raise InvalidArgumentType(
                f"pgkick.contrib.sqlalchemy: needs a sqlalchemy.orm.Session (or a "
                f"scoped_session), got {type(session).__name__}"
            )
        self.session = session
        self.kicker = kicker or default_kicker()  # a bad setting fails here, before any write

    def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int:
        """Insert one job in the session's transaction; kicked after the session commits."""
        return self._pending().enqueue(payload, task=task, **options)

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        return self._pending().enqueue_many(jobs)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """The calls inside written together or not at all, in the session's transaction
        (a workflow's levels: PendingJobs.savepoint)."""
        with self._pending().savepoint():
            yield

    def _pending(self) -> PendingJobs:
        connection = self.session.connection()  # begins if needed
        raw = connection.connection.driver_connection
        if not is_connection(raw):
            raise InvalidArgumentType(
                f"pgkick.contrib.sqlalchemy: the session is on {connection.dialect.name} "
                f"through {connection.dialect.driver}; pgkick's jobs live in PostgreSQL, "
                "reached through the psycopg 3 driver (postgresql+psycopg://)"
            )
        info = self.session.info
        if not info.get(_HOOKED):
            event.listen(self.session, "after_commit", _kick)
            event.listen(self.session, "after_rollback", _forget)
            event.listen(self.session, "after_transaction_end", _ended)
            info[_HOOKED] = True
        pendings = _pendings(self.session)
        if not pendings or pendings[0].conn is not raw:
            pendings = info[_PENDING] = []
        for pending in pendings:  # each kicker kicks its own jobs (a second was ignored)
            if pending.kicker is self.kicker:
                return pending
        pending = PendingJobs(raw, kicker=self.kicker)
        pendings.append(pending)
        return pending


def _pendings(session: Session) -> list[PendingJobs]:
    """The session's transaction's PendingJobs, one for each kicker it was given."""
    pendings = session.info.get(_PENDING)
    return pendings if isinstance(pendings, list) else []


def _kick(session: Session) -> None:
    """The session committed: kick its jobs, once its DBAPI transaction is over. SQLAlchemy
    fires after_commit for a `begin_nested()` savepoint released too, while the outer
    transaction goes on: its jobs wait for that one's commit (kicking then raised
    MisuseError, and the session could not commit at all)."""
    pendings = _pendings(session)
    if pendings and no_transaction(pendings[0].conn):
        del session.info[_PENDING]
        for pending in pendings:
            pending.kick()  # never raises after a commit (pgkick.producer.joined)


def _forget(session: Session) -> None:
    """A rollback: forget the jobs, unless only a savepoint rolled back (the outer
    transaction goes on; kick() re-reads which of its jobs survived)."""
    pendings = _pendings(session)
    if pendings and no_transaction(pendings[0].conn):
        del session.info[_PENDING]
        for pending in pendings:
            pending.discard()


def _ended(session: Session, transaction: SessionTransaction) -> None:
    """The session's outermost transaction ended: forget what it did not kick. A session
    closed without commit or rollback fires no after_rollback, and its jobs (rolled back
    with the connection) rode into the next transaction on the same pooled connection, to
    be kicked by its commit with the old kicker (a review, 2026-12-05).

    A DBAPI transaction still open here is one the session joined and does not own
    (Session(bind=connection) inside connection.begin()): its jobs commit, or not, with the
    app's commit of that connection, after which SQLAlchemy fires no event. They cannot be
    kicked from here, so say so, once, rather than drop them without a word."""
    if transaction.parent is None:
        pendings = _pendings(session)
        session.info.pop(_PENDING, None)
        waiting = [job_id for pending in pendings for job_id in pending.ids]
        if waiting and not no_transaction(pendings[0].conn):
            log.warning(
                "pgkick.contrib.sqlalchemy: jobs %s are in a transaction the session does not "
                "own (it was bound to a connection already in one); nothing kicks them after "
                "that commit, so they start at the next wake-up. For a prompt start enqueue "
                "with pending = pgkick.enqueue_in(connection.connection.driver_connection) "
                "and call pending.kick() after connection.commit()",
                waiting[:20],
            )
        for pending in pendings:
            pending.discard()


def jobs(
    session: Session | scoped_session[Session], *, kicker: Kicker | None = None
) -> SessionJobs:
    """The enqueue target for `task.enqueue(jobs(session), payload)`."""
    return SessionJobs(session, kicker=kicker)


def enqueue(
    session: Session | scoped_session[Session], payload: Any, *, task: str, **options: Any
) -> int:
    """String-name form: `enqueue(session, {"order": 42}, task="send_receipt")`."""
    return SessionJobs(session).enqueue(payload, task=task, **options)
