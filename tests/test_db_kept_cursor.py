"""The cursor a connection keeps for `Database`'s reads (rows, one, dicts, count): reused
from one statement to the next (psycopg keeps its parameters' dumpers while it runs the same
statement again: ~20 us of a single enqueue's client CPU), never handed to a second reader
while a first one reads, and dropped with a statement that failed."""

from __future__ import annotations

import psycopg
import pytest

from pgkick.connections.db import Database, connect


def test_the_next_read_takes_the_cursor_the_last_one_gave_back(dsn: str) -> None:
    with Database.open(dsn) as db:
        assert db.rows("SELECT 1") == [(1,)]
        kept = vars(db.conn)["_pgkick_kept_cursor"]
        assert db.one("SELECT %(n)s::int", n=2) == (2,)
        assert db.dicts("SELECT 3 AS three") == [{"three": 3}]
        assert db.count("SELECT generate_series(1, 4)") == 4
        assert vars(db.conn)["_pgkick_kept_cursor"] is kept


def test_a_reader_inside_another_reads_its_own_answer_on_a_cursor_of_its_own(dsn: str) -> None:
    """The outer reader holds the kept cursor while the inner one (another Database on the
    same connection, as a thread would) runs a statement: each reads its own rows. A cursor
    shared between them would hand the outer reader the inner statement's rows."""
    conn = connect(dsn)
    try:
        outer, inner = Database(conn), Database(conn)
        outer.rows("SELECT 0")  # the connection keeps a cursor now
        seen: list[object] = []

        def read_after_another_statement(cur: psycopg.Cursor[tuple[object, ...]]) -> object:
            seen.append(inner.rows("SELECT 'inner', 2"))
            return cur.fetchall()

        answer = outer._read("SELECT 'outer', 1", {}, read_after_another_statement)
        assert answer == [("outer", 1)]
        assert seen == [[("inner", 2)]]
    finally:
        conn.close()


def test_a_failed_statement_drops_its_cursor_and_the_next_read_works(dsn: str) -> None:
    with Database.open(dsn) as db:
        db.rows("SELECT 1")
        kept = vars(db.conn)["_pgkick_kept_cursor"]
        with pytest.raises(psycopg.errors.DivisionByZero):
            db.rows("SELECT 1 / 0")
        assert "_pgkick_kept_cursor" not in vars(db.conn)
        assert db.rows("SELECT 5") == [(5,)]
        assert vars(db.conn)["_pgkick_kept_cursor"] is not kept
