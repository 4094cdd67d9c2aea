"""pgkick.contrib.sqlalchemy with real SQLAlchemy on the real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

import pgkick
from pgkick.contrib import sqlalchemy as pgkick_sa
from pgkick.errors import InvalidArgument
from pgkick.tasks.registry import Registry
from tests.test_producer import RecordingKicker, count_jobs

tasks = Registry()


@tasks.task("sa_receipt")
def receipt(payload: dict[str, int]) -> None:
    pass


@pytest.fixture
def engine(dsn: str) -> Iterator[Engine]:
    made = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))
    try:
        yield made
    finally:
        made.dispose()


def test_kicked_after_commit_and_not_after_rollback(engine: Engine, dsn: str) -> None:
    """Catches: a kick before the session's commit, the job inserted outside the session's
    transaction (it would survive the rollback), or a kick for a rolled-back session."""
    kicker = RecordingKicker()
    with Session(engine) as session:
        with session.begin():
            session.execute(text("CREATE TABLE orders (id int PRIMARY KEY)"))
            receipt.enqueue(pgkick_sa.jobs(session, kicker=kicker), {"order": 1})
            receipt.enqueue(pgkick_sa.jobs(session, kicker=kicker), {"order": 2})
            assert kicker.kicks == []
            assert count_jobs(dsn) == 0
        assert kicker.kicks == [("default", "enqueue")]  # one kick for both
        assert count_jobs(dsn) == 2

        session.execute(text("INSERT INTO orders VALUES (3)"))
        receipt.enqueue(pgkick_sa.jobs(session, kicker=kicker), {"order": 3})
        session.rollback()
        assert kicker.kicks == [("default", "enqueue")]
        assert count_jobs(dsn) == 2

        # the next transaction starts clean: the rolled-back job is not kicked with it
        pgkick_sa.jobs(session, kicker=kicker).enqueue({"order": 4}, task="sa_receipt", queue="q")
        session.commit()
    assert kicker.kicks == [("default", "enqueue"), ("q", "enqueue")]
    assert count_jobs(dsn) == 3


def test_a_released_savepoint_kicks_nothing_until_the_session_commits(
    engine: Engine, dsn: str
) -> None:
    """Catches after_commit taken for the session's commit when a `begin_nested()` savepoint
    was released (SQLAlchemy fires it for both): the kick ran inside the open transaction,
    raised MisuseError, and the session's own commit was lost with every row of it."""
    kicker = RecordingKicker()
    with Session(engine) as session:
        with session.begin():
            pgkick_sa.jobs(session, kicker=kicker).enqueue({}, task="sa_receipt", queue="outer")
            with session.begin_nested():
                session.execute(text("SELECT 1"))
            assert kicker.kicks == []
        assert kicker.kicks == [("outer", "enqueue")]
    assert count_jobs(dsn) == 1


def test_a_fresh_sessions_batch_rolls_back_with_it(engine: Engine, dsn: str) -> None:
    """Catches a batch committed on its own when it is the session's first statement: the
    session's DBAPI connection has no transaction open yet (psycopg opens one at the first
    statement), and enqueue_many's conn.transaction() made a BEGIN ... COMMIT of its own,
    so the session's rollback left the jobs."""
    kicker = RecordingKicker()
    with Session(engine) as session:
        ids = pgkick_sa.jobs(session, kicker=kicker).enqueue_many(
            [{"payload": {}, "task": "sa_receipt"}, {"payload": {}, "task": "sa_receipt"}]
        )
        session.rollback()
    assert len(ids) == 2
    assert kicker.kicks == []
    assert count_jobs(dsn) == 0


def test_rolled_back_savepoint_takes_its_job_and_its_kick_away(engine: Engine, dsn: str) -> None:
    """Catches: after_commit kicking every job it was given instead of the committed ones."""
    kicker = RecordingKicker()
    with Session(engine) as session, session.begin():
        pgkick_sa.jobs(session, kicker=kicker).enqueue({}, task="sa_receipt", queue="kept")
        nested = session.begin_nested()
        pgkick_sa.jobs(session, kicker=kicker).enqueue({}, task="sa_receipt", queue="gone")
        nested.rollback()
    assert kicker.kicks == [("kept", "enqueue")]
    assert count_jobs(dsn) == 1


def test_not_a_session_or_bad_payload_is_refused(
    engine: Engine, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches: a bad payload reaching the session's connection, or a wrong first argument
    failing later with an unclear AttributeError."""
    monkeypatch.setenv("PGKICK_KICKER", "none")  # a kicker is configured: the payload is at fault
    monkeypatch.setattr("pgkick.kick.default._default", None)
    with pytest.raises(TypeError, match=r"needs a sqlalchemy\.orm\.Session"):
        pgkick_sa.jobs(engine, kicker=RecordingKicker())  # type: ignore[arg-type]
    with Session(engine) as session, session.begin():
        with pytest.raises(ValueError, match="NaN"):
            pgkick_sa.enqueue(session, {"x": float("nan")}, task="sa_receipt")
    assert count_jobs(dsn) == 0


def test_a_session_closed_without_commit_leaves_nothing_to_the_next_transaction(
    engine: Engine, dsn: str
) -> None:
    """close() fires no after_rollback. Catches (a review) the closed transaction's jobs,
    rolled back with it, riding into the next transaction on the same pooled connection
    and kicked by its commit, with the old kicker (the new one got nothing)."""
    old, new = RecordingKicker(), RecordingKicker()
    session = Session(engine)
    pgkick_sa.jobs(session, kicker=old).enqueue({}, task="sa_receipt", queue="gone")
    session.close()
    pgkick_sa.jobs(session, kicker=new).enqueue({}, task="sa_receipt", queue="kept")
    session.commit()
    session.close()
    assert (old.kicks, new.kicks) == ([], [("kept", "enqueue")])
    assert count_jobs(dsn) == 1


def test_a_workflow_level_refused_leaves_none_of_it_in_the_session(
    engine: Engine, dsn: str
) -> None:
    """Catches Workflow.enqueue_with writing its levels with no savepoint over them: a
    level refused left the roots in the session's transaction, and the app that caught
    the refusal committed half a workflow. SessionJobs.savepoint spans the levels."""
    wf = pgkick.Workflow()
    root = wf.add("sa_receipt", {"order": 1})
    wf.add("sa_receipt", {"order": 2, "note": "x" * 300}, after=[root])
    kicker = RecordingKicker()
    with Session(engine) as session:
        with session.begin():
            sink = pgkick_sa.jobs(session, kicker=kicker)
            sink._pending()._enqueuer.max_payload_bytes = 200  # a tighter limit than add's
            with pytest.raises(InvalidArgument, match=r"^workflow node 1 \(sa_receipt\)"):
                wf.enqueue_with(sink)
            sink.enqueue({"order": 3}, task="sa_receipt", queue="q")
        assert kicker.kicks == [("q", "enqueue")]
    assert count_jobs(dsn) == 1


def test_each_kicker_kicks_its_own_jobs_in_one_transaction(engine: Engine, dsn: str) -> None:
    """Catches (a review) the session's first kicker taken for every job of its transaction:
    a second `jobs(session, kicker=...)` was ignored without a word, its jobs kicked by the
    first one's kicker."""
    first, second = RecordingKicker(), RecordingKicker()
    with Session(engine) as session, session.begin():
        pgkick_sa.jobs(session, kicker=first).enqueue({}, task="sa_receipt", queue="one")
        pgkick_sa.jobs(session, kicker=second).enqueue({}, task="sa_receipt", queue="two")
        pgkick_sa.jobs(session, kicker=first).enqueue({}, task="sa_receipt", queue="one")
    assert (first.kicks, second.kicks) == ([("one", "enqueue")], [("two", "enqueue")])
    assert count_jobs(dsn) == 3


def test_a_scoped_session_enqueues_in_its_threads_session(engine: Engine, dsn: str) -> None:
    """A scoped_session (Flask-SQLAlchemy's `db.session`) stands for the thread's Session,
    which it commits. Catches (a review) it refused as not a Session, the error not
    saying what to pass."""
    from sqlalchemy.orm import scoped_session, sessionmaker

    db_session = scoped_session(sessionmaker(engine))
    kicker = RecordingKicker()
    try:
        receipt.enqueue(pgkick_sa.jobs(db_session, kicker=kicker), {"order": 1})
        assert kicker.kicks == []
        db_session.commit()
    finally:
        db_session.remove()
    assert kicker.kicks == [("default", "enqueue")]
    assert count_jobs(dsn) == 1


def test_a_database_that_is_not_postgresql_is_named_in_the_refusal() -> None:
    """Catches (a review) a SQLite session told only that the psycopg 3 driver is needed:
    the error names the database the session is on, and PostgreSQL."""
    lite = create_engine("sqlite://")
    with Session(lite) as session:
        with pytest.raises(TypeError, match=r"on sqlite.*PostgreSQL"):
            pgkick_sa.jobs(session, kicker=RecordingKicker()).enqueue({}, task="sa_receipt")
    lite.dispose()


def test_a_session_in_a_transaction_it_does_not_own_says_its_jobs_wait(
    engine: Engine, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Session(bind=connection) inside connection.begin() (SQLAlchemy's recipe for joining
    an external transaction) commits nothing itself: its after_commit comes while the
    connection's transaction goes on, and SQLAlchemy has no event after that one's commit.
    Catches (a review) the jobs dropped without a word: committed by the connection's
    commit, never kicked, nothing said. Now a warning names them and the form to use."""
    kicker = RecordingKicker()
    with engine.connect() as conn:
        outer = conn.begin()
        with Session(bind=conn) as session:
            pgkick_sa.jobs(session, kicker=kicker).enqueue({}, task="sa_receipt", queue="q")
            session.commit()
        outer.commit()
    assert kicker.kicks == [] and count_jobs(dsn) == 1
    warned = [r.getMessage() for r in caplog.records if r.name == "pgkick.contrib.sqlalchemy"]
    assert len(warned) == 1 and "pgkick.enqueue_in" in warned[0], warned
