"""The asyncio forms of pgkick.connections.db's rules, on psycopg's AsyncConnection
(pgkick.aio, its pool and the async producer): connected the same way (autocommit, no
prepared statement, the same timeout and errors), statements run the same way (the
clock's now, named for PGKICK_SCHEMA, tuples and pgkick's loaders on the app's own
connection). Apart because only asyncio callers need them.
"""

from __future__ import annotations

import asyncio
from typing import Any, LiteralString, TypeGuard

import psycopg
from psycopg.rows import tuple_row

from pgkick import config
from pgkick.connections.adapters import own_loaders
from pgkick.connections.db import Clock, log, malformed, one_line, password_refused, rotated
from pgkick.connections.qualify import qualify
from pgkick.connections.redact import redact
from pgkick.errors import DatabaseUnavailable

AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]
AsyncCursor = psycopg.AsyncCursor[tuple[Any, ...]]


async def connect_producer_async(dsn: str, application_name: str) -> AsyncConnection:
    """An asyncio connection made as connect() makes one: autocommit, no prepared
    statements, a rotated secret's password read again (in a thread: the read is a
    blocking call to AWS)."""
    try:
        return await _connect_async(dsn, application_name)
    except DatabaseUnavailable as exc:
        if not password_refused(exc):
            raise
        fresh = await asyncio.to_thread(rotated, dsn)
        if fresh is None:
            raise
        log.warning("database refused the cached secret's password: read it again")
        return await _connect_async(fresh, application_name)


async def _connect_async(dsn: str, application_name: str) -> AsyncConnection:
    try:
        return await psycopg.AsyncConnection.connect(
            dsn,
            autocommit=True,
            prepare_threshold=None,
            connect_timeout=5,
            application_name=application_name,
        )
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(
            f"cannot connect to PostgreSQL: {redact(one_line(exc), [dsn])}"
        ) from None
    except psycopg.Error as exc:  # a DSN libpq cannot parse
        raise malformed(exc, dsn) from None


async def execute_async(
    conn: AsyncConnection, clock: Clock, query: LiteralString, **params: Any
) -> AsyncCursor:
    """Database.execute for an AsyncConnection: the clock's now, never a prepared statement,
    the statement named for PGKICK_SCHEMA (pgkick.connections.qualify) as the synchronous
    forms do."""
    schema = config.app_settings().schema
    if schema != config.DEFAULT_SCHEMA:
        query = qualify(query, schema)
    values = {"now": clock(), "schema": schema, **params} if "%(" in query else None
    # Tuples, psycopg's own cursor and pgkick's loaders whatever the app's connection's
    # row_factory and cursor_factory (Database._cursor says why).
    cur: AsyncCursor = psycopg.AsyncCursor(conn, row_factory=tuple_row)
    own_loaders(cur)
    return await cur.execute(query, values, prepare=False)


def async_state(conn: AsyncConnection) -> tuple[bool, bool, bool]:
    """(no transaction in progress, autocommit, broken) of an asyncio connection."""
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    return idle, conn.autocommit, conn.broken


def async_transaction_failed(conn: AsyncConnection) -> bool:
    """True when the connection's transaction failed and must be rolled back (the async
    form of pgkick.connections.db.transaction_failed: pgkick.aio.enqueue_in checks it)."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


def is_async_connection(obj: object) -> TypeGuard[AsyncConnection]:
    """True for a psycopg 3 AsyncConnection (pgkick.aio.transaction checks it)."""
    return isinstance(obj, psycopg.AsyncConnection)
