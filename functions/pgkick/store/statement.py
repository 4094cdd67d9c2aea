"""A statement bound to its parameters, and the thin executors that run bound statements
on a `Database` (threads) or on an AsyncConnection (asyncio).

Why: the producer runs the same statements in the same order from synchronous and
asynchronous code. Written twice, the two copies drift (they did: the reservation
after the COMMIT, the unique key's read-back rounds). Here a store binds each
statement once, as data (`Statement`); the order and the decisions are written once,
as a plan: a list sent in one round trip (`send`), or a generator that yields a
statement and gets its rows back (`drive`). The executors below only carry
statements to the server, one for each kind of connection, and decide nothing.
"""

from collections.abc import Generator, Mapping, Sequence
from typing import Any, LiteralString, NamedTuple

from pgkick.connections.aio_db import AsyncConnection, execute_async
from pgkick.connections.db import Clock, Database, DatabaseError
from pgkick.store import queries

Row = tuple[Any, ...]


class Statement(NamedTuple):
    """One named statement of `pgkick.store.queries` with its parameters."""

    query: LiteralString
    params: Mapping[str, Any]
    returns_rows: bool = True


BEGIN = Statement(queries.TRANSACTION_BEGIN, {}, returns_rows=False)
COMMIT = Statement(queries.TRANSACTION_COMMIT, {}, returns_rows=False)

# A plan that needs each answer before its next statement: it yields a statement, is sent
# that statement's rows, and returns its result.
type Steps[T] = Generator[Statement, list[Row], T]


class Answer(NamedTuple):
    """What the server answered to one statement of a round trip: its rows (None when it
    returns none, or when they were lost with a later statement's failure) and its status
    (`COMMIT` for a commit that succeeded; None if it never ran)."""

    rows: list[Row] | None
    status: str | None


def drive[T](db: Database, steps: Steps[T]) -> T:
    """Run a plan's statements one after the other on a Database."""
    try:
        statement = next(steps)
        while True:
            statement = steps.send(db.execute(statement.query, **statement.params).fetchall())
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def drive_async[T](conn: AsyncConnection, clock: Clock, steps: Steps[T]) -> T:
    """`drive` on an AsyncConnection."""
    try:
        statement = next(steps)
        while True:
            statement = steps.send(await rows_async(conn, clock, statement))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def rows_async(conn: AsyncConnection, clock: Clock, statement: Statement) -> list[Row]:
    """One statement's rows on an AsyncConnection."""
    cursor = await execute_async(conn, clock, statement.query, **statement.params)
    return await cursor.fetchall()


def send(
    db: Database, statements: Sequence[Statement]
) -> tuple[list[Answer], DatabaseError | None]:
    """Send statements in one pipeline (one round trip); every answer, and the error if one
    failed (the answers then say how far the server got)."""
    sent: list[Any] = []
    error = None
    try:
        with db.pipeline():
            for statement in statements:
                sent.append(db.execute(statement.query, **statement.params))
    except DatabaseError as exc:
        error = exc
    pairs = zip(statements, sent, strict=False)  # `sent` ends where an error stopped it
    fetched = [_fetch(c) if s.returns_rows else None for s, c in pairs]
    return _answers(sent, fetched, error), error


async def send_async(
    conn: AsyncConnection, clock: Clock, statements: Sequence[Statement]
) -> tuple[list[Answer], DatabaseError | None]:
    """`send` on an AsyncConnection."""
    sent: list[Any] = []
    error = None
    try:
        async with conn.pipeline():
            for each in statements:
                sent.append(await execute_async(conn, clock, each.query, **each.params))
    except DatabaseError as exc:
        error = exc
    pairs = zip(statements, sent, strict=False)
    fetched = [await _fetch_async(c) if s.returns_rows else None for s, c in pairs]
    return _answers(sent, fetched, error), error


def _fetch(cursor: Any) -> list[Row] | DatabaseError:
    try:
        return cursor.fetchall()  # type: ignore[no-any-return]
    except DatabaseError as exc:
        return exc


async def _fetch_async(cursor: Any) -> list[Row] | DatabaseError:
    try:
        return await cursor.fetchall()  # type: ignore[no-any-return]
    except DatabaseError as exc:
        return exc


def _answers(
    sent: list[Any], fetched: list[list[Row] | DatabaseError | None], error: DatabaseError | None
) -> list[Answer]:
    """Each statement's answer; rows that could not be read are lost with the round trip's
    failure (None), and raise when nothing failed."""
    lost = [rows for rows in fetched if isinstance(rows, DatabaseError)]
    if lost and error is None:
        raise lost[0]
    return [
        Answer(None if isinstance(rows, DatabaseError) else rows, cursor.statusmessage)
        for cursor, rows in zip(sent, fetched, strict=True)
    ]
