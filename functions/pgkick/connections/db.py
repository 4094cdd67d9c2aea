"""Connections, and running named statements; psycopg is imported here, in the asyncio
forms beside it (pgkick.connections.aio_db) and in the type adapters
(pgkick.connections.adapters) only.

Why one module: everything else runs the statements of `pgkick.store.queries` (the
text of `sql/`) through a `Database`, so connection rules live in one place:
made for transaction-mode poolers (PgBouncer, Neon's pooler, RDS Proxy) with no
prepared statements and no session state, and autocommit, so each statement is
its own short transaction and nothing stays open while a job's code runs.
Each `Database` names the schema of pgkick's tables (PGKICK_SCHEMA, `pgkick` by
default) and runs every statement rewritten for it (`pgkick.connections.qualify`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, LiteralString, Self, TypeGuard

import psycopg
import psycopg.conninfo
from psycopg.rows import tuple_row

from pgkick import config
from pgkick.connections.adapters import IntListDumper, JsonbLoader, own_loaders
from pgkick.connections.qualify import qualify
from pgkick.connections.redact import redact
from pgkick.errors import ConfigError, DatabaseUnavailable, StatementError

# Returns the instant the SQL should treat as now, or None for the server's now().
Clock = Callable[[], datetime | None]
Connection = psycopg.Connection[tuple[Any, ...]]
"""The psycopg 3 connection pgkick's synchronous forms take (`pgkick.transaction(conn)`,
`pgkick.enqueue_in(conn)`), rows as tuples: an app's own `psycopg.connect(dsn)` is one."""
Cursor = psycopg.Cursor[tuple[Any, ...]]
_KEPT_CURSOR = "_pgkick_kept_cursor"  # Database._read's cursor, an attribute of its connection


log = logging.getLogger("pgkick.connections")
_moved: Clock | None = None  # pgkick.testing's clock while a test moves time (set_moved_clock)


def server_clock() -> datetime | None:
    """The default clock: let PostgreSQL's now() decide, unless a pgkick.testing block
    moved time forward (TestQueue.advance): then the block's instant, for every statement
    of the process, so a job enqueued, claimed or retried in the test agrees on one now."""
    moved = _moved
    return None if moved is None else moved()


def set_moved_clock(clock: Clock | None) -> Clock | None:
    """Make `server_clock` answer `clock` (None: the server's now() again); returns the old
    one. Why a process-wide hook and not a `clock=` argument: the app's own enqueue calls in
    a test pass none, and they must see the time the test moved as the kit's worker does."""
    global _moved
    previous, _moved = _moved, clock
    return previous


DatabaseError = psycopg.Error  # what a statement raises when the server fails it
UniqueViolation = psycopg.errors.UniqueViolation  # a unique index refused a row


class _Opened:
    """Connections this process has opened: on a serverless database each one is a session,
    and sessions are what cost (the bench takes its own from PostgreSQL's count with it)."""

    count = 0


opened = _Opened()


def connect(
    dsn: str,
    *,
    autocommit: bool = True,
    connect_timeout: int = 5,
    retries: int = 0,
    retry_delay: float = 0.5,
    application_name: str = "pgkick",
) -> Connection:
    """Open one short-lived, pooler-safe connection; retry for a compute that is resuming.

    A password refused when the DSN is the secret's cached one is read once more from
    Secrets Manager (`config.rotated_secret_dsn`): after a rotation every connection would
    otherwise fail, and a worker burn Lambda's retries, until the 5-minute cache expires."""

    def attempt(dsn: str) -> Connection:
        return _connect(dsn, autocommit, connect_timeout, retries, retry_delay, application_name)

    try:
        return attempt(dsn)
    except DatabaseUnavailable as exc:
        fresh = rotated(dsn) if password_refused(exc) else None
        if fresh is None:
            raise
        log.warning("database refused the cached secret's password: read it again")
        return attempt(fresh)


def password_refused(exc: BaseException) -> bool:
    """The server refused the password (libpq's text for SCRAM and md5 alike), in psycopg's
    error or in the DatabaseUnavailable made of it."""
    return "password authentication failed" in str(exc)


def rotated(dsn: str) -> str | None:
    """config.rotated_secret_dsn, or None where the settings cannot be read (a bad variable
    of the environment): the server's refusal is the error to show, not that."""
    try:
        return config.rotated_secret_dsn(dsn)
    except ConfigError:
        return None


def _connect(
    dsn: str,
    autocommit: bool,
    connect_timeout: int,
    retries: int,
    retry_delay: float,
    application_name: str,
) -> Connection:
    for attempt in range(retries + 1):
        try:
            conn = psycopg.connect(
                dsn,
                autocommit=autocommit,
                prepare_threshold=None,
                connect_timeout=connect_timeout,
                application_name=application_name,
            )
            opened.count += 1
            conn.adapters.register_loader("jsonb", JsonbLoader)
            conn.adapters.register_dumper(list, IntListDumper)
            return conn
        except psycopg.OperationalError as exc:
            # no wait heals a refused password; from None: the original, unredacted, stays out
            if attempt == retries or password_refused(exc):
                raise DatabaseUnavailable(
                    f"cannot connect to PostgreSQL: {redact(one_line(exc), [dsn])}"
                ) from None
            time.sleep(retry_delay * 2**attempt)
        except psycopg.Error as exc:  # a DSN libpq cannot parse: no retry will help
            raise malformed(exc, dsn) from None
    raise AssertionError("unreachable")


def malformed(exc: psycopg.Error, dsn: str) -> DatabaseUnavailable:
    """A DSN libpq cannot parse, said with the two forms it takes (libpq's own words name
    only what it stumbled on: `missing "=" after "localhost:5432/db"`)."""
    return DatabaseUnavailable(
        f"cannot connect to PostgreSQL: malformed DSN: {redact(one_line(exc), [dsn])}; give "
        "a URL postgresql://user:password@host:5432/dbname or key=value pairs "
        "(host=... port=... dbname=... user=...)"
    )


class Database:
    """Named statements over one connection (autocommit, or the caller's transaction)."""

    def __init__(
        self, conn: Connection, clock: Clock = server_clock, *, schema: str | None = None
    ) -> None:
        self.conn = conn
        self.clock = clock
        # Where pgkick's tables are: given, else PGKICK_SCHEMA, else `pgkick`. Checked here,
        # so a bad name fails before any statement is sent.
        self.schema = (
            config.app_settings().schema if schema is None else config.check_schema_name(schema)
        )
        self._default_schema = self.schema == config.DEFAULT_SCHEMA
        # One statement (or one pipeline) at a time on this connection: the lease keeper's
        # thread shares it, and must not slip a statement into a pipeline.
        self._io = threading.RLock()

    @classmethod
    @contextmanager
    def open(
        cls, dsn: str, clock: Clock = server_clock, *, schema: str | None = None, **options: Any
    ) -> Iterator[Self]:
        """On its own connection, closed on exit (an idle session can keep a DB awake)."""
        if schema is not None:
            config.check_schema_name(schema)  # before connecting
        conn = connect(dsn, **options)
        try:
            yield cls(conn, clock, schema=schema)
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Send the statements inside together, one round trip; nobody else's in between."""
        with self._io, self.conn.pipeline():
            yield

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"now": self.clock(), "schema": self.schema, **params}

    def execute(self, query: LiteralString, **params: Any) -> Cursor:
        """A statement's cursor, for a caller that reads it later (a pipeline's answers)."""
        with self._io:
            return self._execute_on(self._cursor(), query, params)

    def _read[T](
        self, query: LiteralString, params: dict[str, Any], read: Callable[[Cursor], T]
    ) -> T:
        """Run a statement and read its answer on the connection's kept cursor.

        Why kept: psycopg's cursor keeps the dumpers it found for a statement's parameters
        while it runs the same statement again; a cursor made for each statement looks
        them up each time, ~20 us of client CPU of a single enqueue's ~190 (the insert's
        own share ~85). The cursor is taken off the connection while in use, so two
        threads on one connection never share it (the second makes its own), and is
        given back only once its answer is read (a failed statement's is dropped)."""
        cur = vars(self.conn).pop(_KEPT_CURSOR, None) or self._cursor()
        with self._io:
            answer = read(self._execute_on(cur, query, params))
        vars(self.conn)[_KEPT_CURSOR] = cur
        return answer

    def _cursor(self) -> Cursor:
        """A cursor that reads rows as tuples, whatever the connection's row_factory: on the
        app's own connection (pgkick.transaction, enqueue_in, the Django and SQLAlchemy
        forms) a dict_row or class_row of the app's made job ids of column names, and
        raised after the commit (a review, F1). psycopg's own Cursor, whatever the
        connection's cursor_factory: pgkick's statements take %(name)s parameters, which an
        app's RawCursor ($1) refused with a TypeError at every enqueue (a review of pooler
        setups, F1). pgkick's loaders too (own_loaders says why)."""
        cur: Cursor = psycopg.Cursor(self.conn, row_factory=tuple_row)
        own_loaders(cur)
        return cur

    def _execute_on(self, cur: Cursor, query: LiteralString, params: dict[str, Any]) -> Cursor:
        """Every statement of this Database passes here, once (the tests' spies and wedges
        watch this one method)."""
        # prepare=False: never a server-side prepared statement, even on the app's own
        # connection opened with psycopg's default prepare_threshold; through a
        # transaction-mode pooler the next transaction may get another server connection.
        if not self._default_schema:
            query = qualify(query, self.schema)
        return cur.execute(query, self._params(params) if "%(" in query else None, prepare=False)

    def rows(self, query: LiteralString, **params: Any) -> list[tuple[Any, ...]]:
        return self._read(query, params, _all)

    def dicts(self, query: LiteralString, **params: Any) -> list[dict[str, Any]]:
        return self._read(query, params, _dicts)

    def one(self, query: LiteralString, **params: Any) -> tuple[Any, ...]:
        row = self._read(query, params, _first)
        if row is None:
            raise StatementError(f"expected a row from: {query.splitlines()[0]}")
        return row

    def count(self, query: LiteralString, **params: Any) -> int:
        return self._read(query, params, _rowcount)


# The readers of _read: module functions (an attribute of the generic alias `Cursor` goes
# through typing's __getattr__ on every call).
def _all(cur: Cursor) -> list[tuple[Any, ...]]:
    return cur.fetchall()


def _first(cur: Cursor) -> tuple[Any, ...] | None:
    return cur.fetchone()


def _dicts(cur: Cursor) -> list[dict[str, Any]]:
    names = [column.name for column in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _rowcount(cur: Cursor) -> int:
    return cur.rowcount


def database_identity(dsn: str) -> str:
    """Which database a DSN names, as `host:port/dbname` (no user, no password): how two
    processes tell whether they work on the same jobs table."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host, port = info.get("host") or "localhost", info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def dsn_for_database(dsn: str, dbname: str) -> str:
    """The same server and role, another database (pgkick.testing's per-test copies)."""
    return psycopg.conninfo.make_conninfo(dsn, dbname=dbname)


def no_transaction(conn: Connection) -> bool:
    """True when no transaction is in progress (nor failed) on this connection."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def idle_outside_transaction(conn: Connection) -> bool:
    """True for a connection that is not autocommit and has no transaction in progress."""
    return no_transaction(conn) and not conn.autocommit


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def answered_outside_transaction(conn: Connection) -> bool:
    """True when the connection works and no transaction is open: after an error on an
    autocommit connection, the server refused the statement and rolled back its implicit
    transaction (a broken connection leaves the outcome unknown)."""
    return not conn.broken and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def in_failed_transaction(conn: Connection) -> bool:
    """True when the server refused a statement of the open transaction (nothing of it
    can commit now) and the connection still works: a ROLLBACK ends it for sure."""
    return not conn.broken and conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


def is_connection(obj: object) -> TypeGuard[Connection]:
    """True for a psycopg 3 connection (the framework forms check their driver's with it)."""
    return isinstance(obj, psycopg.Connection)


def transaction_failed(conn: Connection) -> bool:
    """True when the connection's transaction failed and must be rolled back."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
