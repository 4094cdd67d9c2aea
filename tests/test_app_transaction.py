"""`pgkick.transaction(conn)` and `pgkick.aio.transaction(conn)`: what the app's own
transaction sends for its jobs, read from the server (pg_stat_statements).

Which of its jobs the transaction commits (a savepoint the app rolled back may have taken
some away: tests/test_watch.py) is read inside it, just before its COMMIT, when every
savepoint is closed: one round trip. It used to be read after the commit in a transaction
of its own (BEGIN, SELECT, COMMIT), and for a kicker that kicks nothing too. The kick's
reservation, after the commit, is one statement in autocommit (the app's setting given
back), not BEGIN, reservation, COMMIT.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg.rows import dict_row, namedtuple_row

import pgkick
from pgkick import aio
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from tests.helpers import calls_between, statements_sent
from tests.test_producer import RecordingKicker

SENT = {
    "begin": ["BEGIN"],
    "commit": ["COMMIT"],
    "reread": ["-- job_committed_among:%"],
    "reserve": ["-- queue_kick_reserve:%"],
}


def sent(dsn: str) -> dict[str, int]:
    return statements_sent(dsn, SENT)


def test_the_app_transaction_reads_its_jobs_before_its_commit(dsn: str) -> None:
    """Catches: the re-read in a transaction of its own after the commit (a BEGIN and a
    COMMIT more), and a re-read for a kicker that kicks nothing."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=NoKicker()) as jobs:  # the session warmed
            jobs.enqueue({}, task="t")
        before = sent(dsn)
        with producer.transaction(conn, kicker=NoKicker()) as jobs:
            jobs.enqueue({}, task="t")
        middle = sent(dsn)
        with producer.transaction(conn, kicker=kicker) as jobs:
            jobs.enqueue({}, task="t", queue="q")
        after = sent(dsn)
        assert not conn.autocommit  # the app's setting given back
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert calls_between(before, middle) == {"begin": 1, "commit": 1, "reread": 0, "reserve": 0}
    assert calls_between(middle, after) == {"begin": 1, "commit": 1, "reread": 1, "reserve": 1}
    assert kicker.kicks == [("q", "enqueue")]


def test_a_refused_reservation_after_the_app_commit_kicks_and_gives_its_connection_back(
    dsn: str,
) -> None:
    """Catches: an exception after the app's commit (it would enqueue again), no kick when
    who watches is unknown, and the app's connection left in autocommit."""
    with psycopg.connect(dsn, autocommit=True) as conn:  # the reservation's insert refused
        conn.execute(
            "ALTER TABLE pgkick.queue_watchers ADD CONSTRAINT refuse CHECK (false) NOT VALID"
        )
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=kicker) as jobs:
            job_id = jobs.enqueue({}, task="t", queue="q")
        assert not conn.autocommit
        row = conn.execute("SELECT status FROM pgkick.jobs WHERE id = %s", (job_id,)).fetchone()
        conn.rollback()
    assert row == ("queued",)
    assert kicker.kicks == [("q", "enqueue")]


def test_the_asyncio_app_transaction_sends_what_the_synchronous_one_sends(dsn: str) -> None:
    """Catches: pgkick.aio re-reading after the commit, or opening a transaction for a
    reservation a kicker that kicks nothing does not make."""
    kicker = RecordingKicker()

    async def main() -> list[dict[str, int]]:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=NoKicker()) as jobs:  # the session
                await jobs.enqueue({}, task="t")
            marks = [sent(dsn)]
            async with aio.transaction(conn, kicker=NoKicker()) as jobs:
                await jobs.enqueue({}, task="t")
            marks.append(sent(dsn))
            async with aio.transaction(conn, kicker=kicker) as jobs:
                await jobs.enqueue({}, task="t", queue="q")
            marks.append(sent(dsn))
            assert not conn.autocommit  # the app's setting given back
        return marks

    before, middle, after = asyncio.run(asyncio.wait_for(main(), 30))
    assert calls_between(before, middle) == {"begin": 1, "commit": 1, "reread": 0, "reserve": 0}
    assert calls_between(middle, after) == {"begin": 1, "commit": 1, "reread": 1, "reserve": 1}
    assert kicker.kicks == [("q", "enqueue")]


def test_the_asyncio_app_transaction_kicks_when_its_reservation_is_refused(dsn: str) -> None:
    """Catches: an exception out of pgkick.aio.transaction after the app's commit, no kick
    when who watches is unknown, and the app's connection left in autocommit."""
    with psycopg.connect(dsn, autocommit=True) as conn:  # the reservation's insert refused
        conn.execute(
            "ALTER TABLE pgkick.queue_watchers ADD CONSTRAINT refuse CHECK (false) NOT VALID"
        )
    kicker = RecordingKicker()

    async def main() -> tuple[bool, tuple[object, ...] | None]:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                job_id = await jobs.enqueue({}, task="t", queue="q")
            cur = await conn.execute("SELECT status FROM pgkick.jobs WHERE id = %s", (job_id,))
            row = await cur.fetchone()
            await conn.rollback()
            return conn.autocommit, row

    autocommit, row = asyncio.run(asyncio.wait_for(main(), 30))
    assert (autocommit, row) == (False, ("queued",))
    assert kicker.kicks == [("q", "enqueue")]


ROW_FACTORIES = {"dict_row": dict_row, "namedtuple_row": namedtuple_row}


@pytest.mark.parametrize("factory", sorted(ROW_FACTORIES))
def test_every_form_on_the_apps_connection_ignores_its_row_factory(dsn: str, factory: str) -> None:
    """Catches: pgkick's statements on the app's connection read with the app's row factory
    (a review, F1): with dict_row, pgkick.transaction raised (the column name "id" sent back
    as a bigint), enqueue_in returned "id" as the job id, and its kick() raised after the
    commit; pgkick.aio.transaction likewise."""
    rows = ROW_FACTORIES[factory]
    kicker = RecordingKicker()
    with psycopg.connect(dsn, row_factory=rows) as conn:
        with producer.transaction(conn, kicker=kicker) as jobs:
            first = jobs.enqueue({}, task="t", queue="a")
            many = jobs.enqueue_many([{"payload": {}, "task": "t", "queue": "a"}])
        conn.execute("SELECT 1")  # the app's own transaction, joined
        pending = pgkick.enqueue_in(conn, kicker=kicker)
        joined = pending.enqueue({}, task="t", queue="b")
        conn.commit()
        assert pending.kick() == [joined]

    async def main() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, row_factory=rows) as conn:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                return await jobs.enqueue({}, task="t", queue="c")

    in_aio = asyncio.run(asyncio.wait_for(main(), 30))
    ids = [first, *many, joined, in_aio]
    assert all(type(job_id) is int for job_id in ids), ids
    assert len(set(ids)) == 4
    assert kicker.kicks == [("a", "enqueue"), ("b", "enqueue"), ("c", "enqueue")]


CURSOR_FACTORIES = {
    "RawCursor": (psycopg.RawCursor, psycopg.AsyncRawCursor),
    "ClientCursor": (psycopg.ClientCursor, psycopg.AsyncClientCursor),
}


@pytest.mark.parametrize("factory", sorted(CURSOR_FACTORIES))
def test_every_form_on_the_apps_connection_ignores_its_cursor_factory(
    dsn: str, factory: str
) -> None:
    """Catches: pgkick's cursors on the app's connection made by the app's cursor_factory
    (a review of pooler setups, F1): with psycopg's RawCursor ($1 placeholders, what an app
    picks for server-side binding without prepared statements) every enqueue of
    pgkick.transaction and pgkick.aio.transaction raised TypeError ("raw queries require a
    sequence of parameters") and the app's transaction rolled back."""
    sync_cursor, async_cursor = CURSOR_FACTORIES[factory]
    kicker = RecordingKicker()
    with psycopg.connect(dsn, cursor_factory=sync_cursor) as conn:
        with producer.transaction(conn, kicker=kicker) as jobs:
            first = jobs.enqueue({}, task="t", queue="a")
            many = jobs.enqueue_many([{"payload": {}, "task": "t", "queue": "a"}])
        pending = pgkick.enqueue_in(conn, kicker=kicker)
        joined = pending.enqueue({}, task="t", queue="b")
        conn.commit()
        assert pending.kick() == [joined]

    async def main() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, cursor_factory=async_cursor) as conn:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                return await jobs.enqueue({}, task="t", queue="c")

    in_aio = asyncio.run(asyncio.wait_for(main(), 30))
    ids = [first, *many, joined, in_aio]
    assert all(type(job_id) is int for job_id in ids) and len(set(ids)) == 4, ids
    assert kicker.kicks == [("a", "enqueue"), ("b", "enqueue"), ("c", "enqueue")]


def test_each_transaction_form_names_the_connection_it_needs(dsn: str) -> None:
    """Catches (a review, F4) pgkick.transaction(AsyncConnection) failing on the context
    manager protocol, pgkick.transaction("postgresql://...") and pgkick.aio.transaction(a
    psycopg.Connection) on an AttributeError: none said what to pass instead."""
    kicker = RecordingKicker()

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            with pytest.raises(TypeError, match=r"got AsyncConnection.*pgkick\.aio\.transaction"):
                with producer.transaction(conn, kicker=kicker):  # type: ignore[arg-type]
                    pass
        with psycopg.connect(dsn) as sync_conn:
            with pytest.raises(TypeError, match=r"got Connection.*use pgkick\.transaction"):
                async with aio.transaction(sync_conn, kicker=kicker):  # type: ignore[arg-type]
                    pass

    asyncio.run(asyncio.wait_for(main(), 30))
    with pytest.raises(TypeError, match=r"got str.*pgkick\.enqueue_and_kick"):
        with producer.transaction(dsn, kicker=kicker):  # type: ignore[arg-type]
            pass


def test_a_kick_via_another_connection_before_the_commit_keeps_the_jobs_for_the_next(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Catches kick(via=...) called while the app's transaction was still open dropping the
    jobs it could not see (not committed yet) without a word: committed after, they were
    never kicked. They stay pending, with a warning, and the kick after the commit sends
    them."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as app, psycopg.connect(dsn, autocommit=True) as other:
        with app.transaction():
            jobs = pgkick.enqueue_in(app, kicker=kicker)
            job_id = jobs.enqueue({}, task="t", queue="via")
            with caplog.at_level("WARNING", logger="pgkick"):
                assert jobs.kick(via=other) == []
            assert "not committed yet" in caplog.text and kicker.kicks == []
        assert jobs.kick() == [job_id]
    assert [queue for queue, *_ in kicker.kicks] == ["via"]
