"""pgkick.enqueue_in: jobs join the app's open transaction; kick() after its commit."""

from __future__ import annotations

import psycopg
import pytest

import pgkick
from pgkick.tasks.registry import Registry
from tests.test_producer import RecordingKicker, count_jobs

tasks = Registry()


@tasks.task("receipt")
def receipt(payload: dict[str, int]) -> None:
    pass


def test_kick_refused_before_commit_then_sent_once_after(dsn: str) -> None:
    """Catches: a kick sent while the app's transaction is still open (a worker would find
    nothing), or a second kick() kicking the same jobs again."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:  # autocommit off: psycopg opens the transaction
        conn.execute("SELECT 1")
        pending = pgkick.enqueue_in(conn, kicker=kicker)
        first = pending.enqueue({"order": 1}, task="receipt", queue="mail")
        (second,) = receipt.enqueue_many([{"order": 2}], into=pending, queue="mail")
        with pytest.raises(RuntimeError, match="still open"):
            pending.kick()
        assert kicker.kicks == []
        conn.commit()
        assert pending.kick() == [first, second]
        assert pending.kick() == []
    assert kicker.kicks == [("mail", "enqueue")]  # one kick for the queue, not one per job


def test_rollback_and_rolled_back_savepoint_kick_nothing_for_their_jobs(dsn: str) -> None:
    """Catches: kick() trusting its own list instead of re-reading which jobs committed
    (job_committed_among): a rolled-back job announced to a worker."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:
        pending = pgkick.enqueue_in(conn, kicker=kicker)
        kept = pending.enqueue({}, task="t", queue="kept")
        with pytest.raises(ZeroDivisionError):
            with conn.transaction():  # a savepoint inside the app's transaction
                pending.enqueue({}, task="t", queue="gone")
                raise ZeroDivisionError
        conn.commit()
        assert pending.kick() == [kept]
        assert kicker.kicks == [("kept", "enqueue")]

        pending.enqueue({}, task="t", queue="rolled")
        conn.rollback()
        assert pending.kick() == []
    assert kicker.kicks == [("kept", "enqueue")]
    assert count_jobs(dsn) == 1


def test_an_idle_connection_rolls_back_every_job_form_with_the_app(dsn: str) -> None:
    """Catches pgkick committing on its own on a connection that is not autocommit and has
    run nothing yet: a job with `after=` and `enqueue_many` wrapped their statements in
    conn.transaction(), which psycopg makes a BEGIN ... COMMIT of its own when none is open,
    so the app's rollback left the jobs (and the parent flagged as having dependants)."""
    parent = pgkick.enqueue_and_kick({}, task="t", dsn=dsn, kicker=RecordingKicker())
    forms = {
        "plain": lambda pending: [pending.enqueue({}, task="t")],
        "after": lambda pending: [pending.enqueue({}, task="t", after=[parent])],
        "unique": lambda pending: [pending.enqueue({}, task="t", unique_key="u")],
        "many": lambda pending: pending.enqueue_many(
            [{"payload": {}, "task": "t"}, {"payload": {}, "task": "t", "unique_key": "m"}]
        ),
    }
    for form, enqueue in forms.items():
        with psycopg.connect(dsn) as conn:  # autocommit off, nothing run yet
            pending = pgkick.enqueue_in(conn, kicker=RecordingKicker())
            enqueue(pending)
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS, form
            conn.rollback()
            assert pending.kick() == [], form
    with psycopg.connect(dsn) as conn:  # a refused job sends nothing: still no transaction
        pending = pgkick.enqueue_in(conn, kicker=RecordingKicker())
        with pytest.raises(ValueError, match="NaN"):
            pending.enqueue({"x": float("nan")}, task="t", after=[parent])
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert count_jobs(dsn) == 1, "a job outlived the app's rollback"
    with psycopg.connect(dsn) as conn:
        flagged = conn.execute("SELECT has_dependants FROM pgkick.jobs WHERE id = %s", (parent,))
        assert flagged.fetchone() == (False,)


def test_autocommit_or_failed_transaction_is_refused_before_writing(dsn: str) -> None:
    """Catches: enqueue_in on a connection with no transaction open (each job would commit
    alone, and kick() would be the caller's to forget), or on a failed transaction, or a
    bad payload reaching the insert."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pending = pgkick.enqueue_in(conn, kicker=RecordingKicker())
        with pytest.raises(RuntimeError, match="autocommit with no transaction open"):
            pending.enqueue({}, task="t")
    with psycopg.connect(dsn) as conn:
        pending = pgkick.enqueue_in(conn, kicker=RecordingKicker())
        with pytest.raises(ValueError, match="NaN"):
            pending.enqueue({"x": float("nan")}, task="t")
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1/0")
        with pytest.raises(RuntimeError, match="has failed; roll it back"):
            pending.enqueue({}, task="t")
    with pytest.raises(TypeError, match="psycopg 3 connection"):
        pgkick.enqueue_in(dsn, kicker=RecordingKicker())  # type: ignore[arg-type]
    assert count_jobs(dsn) == 0
