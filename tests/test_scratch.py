"""`pgkick bench` and `pgkick demo` touch only a database of their own, and close only
the sessions they opened."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pgkick import cli
from pgkick.connections.db import Database
from pgkick_dev import queries as dev_queries
from pgkick_dev.awake.compare import OWN_SESSIONS
from pgkick_dev.awake.monitor import AwakeMonitor
from tests.helpers import seed
from tests.store import JobStore


def app_state(dsn: str) -> tuple[list[tuple[int, str]], str | None]:
    """The app's jobs, and the jobs table's comment (bench and demo mark theirs)."""
    with psycopg.connect(dsn) as conn:
        jobs = conn.execute("SELECT id, status FROM pgkick.jobs ORDER BY id").fetchall()
        comment_sql = "SELECT obj_description('pgkick.jobs'::regclass, 'pg_class')"
        (comment,) = conn.execute(comment_sql).fetchone()  # type: ignore[misc]
    return jobs, comment


TOOLS = {
    "bench": ["bench", "--quick", "--items", "enqueue"],
    "demo": ["demo", "--jobs", "10", "--window", "0.5", "--no-compare"],
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_database_holding_an_apps_jobs_is_refused_and_left_alone(
    dsn: str, tool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches bench and demo using whatever database they are given: the bench emptied
    an app's jobs table (500 of 500 queued jobs gone), the demo left its jobs in the app's
    queue. Given a database holding jobs they did not create, they refuse it in one line,
    exit non-zero, and write nothing (no job, no mark)."""
    with JobStore.open(dsn) as store:
        seed(store, 5)
    before = app_state(dsn)
    code = cli.main([*TOOLS[tool], "--dsn", dsn, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "refusing the database --dsn names: it holds jobs" in err, err[-2000:]
    assert app_state(dsn) == before and before[1] is None and len(before[0]) == 5


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_without_dsn_they_never_use_database_url(
    dsn: str,
    tool: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches bench and demo falling back to $DATABASE_URL (any app's shell exports it):
    the bench emptied that database's queue. Without --dsn they start an embedded server,
    here made to fail at once (binaries that only exit 1), and the app's database is
    never touched."""
    with JobStore.open(dsn) as store:
        seed(store, 5)
    before = app_state(dsn)
    broken = tmp_path / "bin"
    broken.mkdir()
    for name in ("postgres", "initdb", "pg_ctl", "pgbench"):
        (broken / name).write_text("#!/bin/sh\nexit 1\n")
        (broken / name).chmod(0o755)
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_POSTGRES_BIN", str(broken))
    code = cli.main([*TOOLS[tool], "--out", str(tmp_path)])
    err = capsys.readouterr().err
    embedded = ("initdb failed", "cannot reach data folder", "could not run")  # its set-up
    assert code == 2 and any(e in err for e in embedded), err[-2000:]
    assert app_state(dsn) == before


def test_an_empty_database_is_taken_marked_and_reused(dsn: str) -> None:
    """The accepted case: an empty database is migrated and marked as the tools' own, and
    a second run accepts it even though it now holds their jobs."""
    from pgkick_dev import scratch

    scratch.claim(dsn, "bench")
    with JobStore.open(dsn) as store:
        seed(store, 3)  # the bench's own jobs, left behind
    scratch.claim(dsn, "demo")
    assert app_state(dsn)[1] is not None


def test_a_comparison_closes_only_the_sessions_it_opened(dsn: str) -> None:
    """Catches the awake comparison (run by the demo and the bench) terminating every idle
    client session of the database at a suspend, an app's included: only sessions with
    the application names it gives its own are closed."""
    with (
        psycopg.connect(dsn, autocommit=True, application_name="someone-else") as foreign,
        psycopg.connect(dsn, autocommit=True, application_name="pgkick") as own,
        Database.open(dsn, application_name="pgkick-awake") as watcher,
    ):
        foreign.execute("SELECT 1")
        own.execute("SELECT 1")
        monitor = AwakeMonitor(dsn, window=0.0, close_on_suspend=True, close_only=OWN_SESSIONS)
        assert (
            monitor.sample(watcher.dicts(dev_queries.SESSION_LIST_ACTIVITY), 0.1, watcher) is False
        )
        assert monitor.report.closed_sessions == 1
        foreign.execute("SELECT 1")  # still open
        with pytest.raises(psycopg.OperationalError):
            own.execute("SELECT 1")
