"""Small helpers the tests share: a movable clock, bulk seeding, reading a row."""

from __future__ import annotations

import importlib
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from pgkick.validation import JobSpec
from tests.store import JobStore


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeClock:
    """The `now` the SQL sees, moved by the test instead of sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def seed(
    store: JobStore,
    count: int,
    *,
    queue: str = "default",
    task: str = "noop",
    max_attempts: int = 5,
    payload: str = "{}",
) -> list[int]:
    """Insert `count` ready jobs in one statement; returns their ids."""
    spec = JobSpec(queue, task, payload, None, timedelta(0), max_attempts)
    jobs = store.insert_many([[spec] * count])
    return [job.id for job in jobs]


def job_row(dsn: str, job_id: int) -> dict[str, object]:
    """The job's row as a dict, read on a separate connection."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT * FROM pgkick.jobs WHERE id = %s", (job_id,))
        names = [col.name for col in cur.description or []]
        row = cur.fetchone()
        assert row is not None, f"job {job_id} does not exist"
        return dict(zip(names, row, strict=True))


def wait_for_lock_waiters(
    dsn: str, pids: list[int] | None = None, *, count: int = 1, timeout: float = 10.0
) -> None:
    """Return once `count` sessions (of `pids`, if given) wait on a lock in this database.

    The interleaving is observed, not slept for. Each look is its own transaction:
    pg_stat_activity is a snapshot that would never change inside one.
    """
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
                " AND (%(pids)s::int[] IS NULL OR pid = ANY(%(pids)s))",
                {"pids": pids},
            ).fetchone()
            if row and row[0] >= count:
                return
            time.sleep(0.005)
    raise AssertionError(f"{count} session(s) never blocked on a lock")


def load_handler(function: str) -> Any:
    """A fresh import of pgkick.aws.<function> (worker, reaper): a cold start with today's
    environment (settings, tasks, kicker made anew)."""
    name = f"pgkick.aws.{function}"
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def event(name: str) -> Any:
    """One of the event files `sam local invoke -e` takes."""
    return json.loads(
        (Path(__file__).parent.parent / "infra" / "events" / f"{name}.json").read_text()
    )


def sessions_of(dsn: str, application: str = "pgkick") -> int:
    """Sessions in this test's database opened by pgkick (its application_name)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s",
            (application,),
        ).fetchone()
    return int(row[0]) if row else 0


def sessions_gone(dsn: str, application: str = "pgkick", within: float = 0.5) -> bool:
    """No session of `application` is left in this test's database within `within` seconds:
    a backend whose client closed it needs a moment to leave pg_stat_activity on a loaded
    machine (seen: one still listed at once), while a session kept open (a lingering
    connection lives 1 s or more) is still there."""
    deadline = time.monotonic() + within
    while sessions_of(dsn, application):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def statements_sent(dsn: str, kinds: dict[str, list[str]]) -> dict[str, int]:
    """statement_calls for each kind of statement, by name (a test takes two readings
    and compares them with calls_between)."""
    return {name: statement_calls(dsn, patterns) for name, patterns in kinds.items()}


def calls_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The calls of each kind sent between two readings of statements_sent."""
    return {name: after[name] - before[name] for name in before}


def statement_calls(dsn: str, patterns: list[str]) -> int:
    """Calls so far, in this database, of statements whose text is LIKE any pattern
    (pgkick's statements start with `-- <name>:`); needs pg_stat_statements preloaded."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND query LIKE ANY(%s)",
            (patterns,),
        ).fetchone()
    return int(row[0]) if row else 0
