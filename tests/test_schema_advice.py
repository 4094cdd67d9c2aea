"""A database never migrated: every library entry point says to run `pgkick migrate`.

Issue #27, defect 4: the library raised psycopg's raw `UndefinedTable: relation
"pgkick.jobs" does not exist` where the CLI says what to do. Each entry point
below is run against a real database without pgkick's schema.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import pgkick
from pgkick import aio
from pgkick.kick.kickers import NoKicker

ADVICE = r"pgkick's schema is missing.*run `pgkick migrate` \(or `pgkick.migrate\(dsn\)`"


def test_enqueue_forms_on_an_unmigrated_database_say_to_migrate(empty_dsn: str) -> None:
    """Catches: UndefinedTable / InvalidSchemaName escaping from enqueue_and_kick,
    enqueue_many, a job enqueued in the app's transaction, and result() / wait()."""
    with pytest.raises(pgkick.SchemaError, match=ADVICE):
        pgkick.enqueue_and_kick({}, task="noop", dsn=empty_dsn, kicker=NoKicker())
    with pytest.raises(pgkick.SchemaError, match=ADVICE):
        pgkick.enqueue_many([{"payload": {}, "task": "noop"}], dsn=empty_dsn, kicker=NoKicker())
    with psycopg.connect(empty_dsn) as conn:
        with pytest.raises(pgkick.SchemaError, match=ADVICE):
            with pgkick.transaction(conn, kicker=NoKicker()) as jobs:
                jobs.enqueue({}, task="noop")
    with pytest.raises(pgkick.SchemaError, match=ADVICE):
        pgkick.result(1, dsn=empty_dsn)
    with pytest.raises(pgkick.SchemaError, match=ADVICE):
        pgkick.wait(1, dsn=empty_dsn, timeout=1)


def test_async_forms_on_an_unmigrated_database_say_to_migrate(empty_dsn: str) -> None:
    """Catches the same raw error from pgkick.aio's coroutines."""

    async def both() -> None:
        with pytest.raises(pgkick.SchemaError, match=ADVICE):
            await aio.enqueue_and_kick({}, task="noop", dsn=empty_dsn, kicker=NoKicker())
        with pytest.raises(pgkick.SchemaError, match=ADVICE):
            await aio.enqueue_many(
                [{"payload": {}, "task": "noop"}], dsn=empty_dsn, kicker=NoKicker()
            )

    asyncio.run(both())


def test_the_apps_own_missing_table_is_not_translated(dsn: str) -> None:
    """Catches a translation too broad: the app's own statement failing inside
    pgkick.transaction() must surface as the app's error, not as pgkick's advice."""
    with psycopg.connect(dsn) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable, match="orders"):
            with pgkick.transaction(conn, kicker=NoKicker()):
                conn.execute("INSERT INTO orders VALUES (1)")


def test_public_migrate_makes_the_database_usable(empty_dsn: str) -> None:
    """Catches pgkick.migrate missing from the public API (the README's advice), or not
    idempotent."""
    assert pgkick.migrate(empty_dsn)  # versions applied
    assert pgkick.migrate(empty_dsn) == []
    job_id = pgkick.enqueue_and_kick({"n": 1}, task="noop", dsn=empty_dsn, kicker=NoKicker())
    with psycopg.connect(empty_dsn) as conn:
        row: Any = conn.execute("SELECT status FROM pgkick.jobs WHERE id = %s", [job_id])
        assert row.fetchone() == ("queued",)


def test_an_unmigrated_other_schema_says_to_migrate_that_schema(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches the advice naming `pgkick migrate` alone for PGKICK_SCHEMA=b: run from a shell
    without the variable it made schema pgkick, and the app still failed; the worker's and
    the CLI's check say `pgkick migrate --schema b`."""
    monkeypatch.setenv("PGKICK_SCHEMA", "b")
    with pytest.raises(pgkick.SchemaError, match=r"run `pgkick migrate --schema b`"):
        pgkick.enqueue_and_kick({}, task="noop", dsn=empty_dsn, kicker=NoKicker())
