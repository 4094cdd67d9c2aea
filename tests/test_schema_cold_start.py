"""Both handlers refuse, at their first invocation, a schema older or newer than their code.

Why: an older schema (a deploy that skipped `pgkick migrate`) or a newer one (an old
function left running after a newer pgkick migrated) may still have a `jobs` table
whose statements half work. The handler must stop before its first statement on the
jobs, with an error that says what to do, and leave every job as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick.store import migrations as schema
from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import event, load_handler, seed, sessions_of
from tests.store import JobStore

# Powertools warns when a handler that raised published no metric: expected here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def older(conn: psycopg.Connection[Any]) -> None:
    """The code's latest migration not applied (its row gone: the check reads the record)."""
    conn.execute(
        "DELETE FROM pgkick.pgkick_migrations WHERE version = %s", (schema.LATEST_VERSION,)
    )


def newer(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO pgkick.pgkick_migrations (version, name) VALUES (%s, 'from a newer pgkick')",
        (schema.LATEST_VERSION + 1,),
    )


SCHEMAS: list[tuple[Callable[[psycopg.Connection[Any]], None], str]] = [
    (older, r"behind this code \(missing versions \[\d+\]\): run `pgkick migrate`"),
    (newer, r"newer than this code knows \(\d+\): deploy the newer pgkick"),
]


def jobs_with_work_for_both_handlers(dsn: str) -> list[tuple[Any, ...]]:
    """Ready jobs (a worker would claim them), an expired lease (a reaper would re-queue it)
    and a job finished a month ago (a reaper would purge it); returns every row."""
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="old")
        store.complete_many(store.claim("old", batch=1, lease=timedelta(minutes=5)))
        seed(store, 4)
        store.claim("default", batch=1, lease=timedelta(minutes=5))
        store.conn.execute(
            "UPDATE pgkick.jobs SET locked_until = now() - interval '1 minute'"
            " WHERE status = 'running'"
        )
        store.conn.execute(
            "UPDATE pgkick.jobs SET finished_at = now() - interval '30 days' WHERE status = 'done'"
        )
    return all_jobs(dsn)


def all_jobs(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT * FROM pgkick.jobs ORDER BY id").fetchall()


@pytest.mark.parametrize(("function", "kick"), [("worker", "kick"), ("reaper", "reaper")])
@pytest.mark.parametrize(("make_schema", "says"), SCHEMAS, ids=["older", "newer"])
def test_a_cold_handler_refuses_a_schema_older_or_newer_than_its_code(
    dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    function: str,
    kick: str,
    make_schema: Callable[[psycopg.Connection[Any]], None],
    says: str,
) -> None:
    """Catches: `schema.check` accepting any version as long as the migrations table has
    a row (or a handler that never checks): the worker would claim and complete the
    ready jobs, the reaper re-queue the expired lease and purge the old job."""
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    before = jobs_with_work_for_both_handlers(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        make_schema(conn)
    app = load_handler(function)  # a cold start: settings and tasks, no database yet
    with pytest.raises(schema.SchemaError, match=says):
        app.handler(event(kick), FakeLambdaContext())
    assert all_jobs(dsn) == before  # nothing claimed, re-queued, completed or purged
    assert sessions_of(dsn) == 0  # and its connection closed
