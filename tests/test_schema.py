"""Migrations (idempotent, safe when racing, versioned) and the sql/ bundle staying in sync."""

from __future__ import annotations

import json
import shutil
import threading
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from pgkick.store import groups, migration_scripts, queries
from pgkick.store import migrations as schema
from pgkick.validation import job_spec
from pgkick_dev import queries as dev_queries
from tests.helpers import wait_for_lock_waiters
from tests.store import JobStore
from tools import bundle_sql

ROOT = Path(__file__).parent.parent
LEASE = timedelta(minutes=5)


def schema_snapshot(dsn: str) -> list[tuple[str, ...]]:
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'pgkick' ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'pgkick' ORDER BY 1"
        ).fetchall()
        versions = conn.execute("SELECT version, name FROM pgkick.pgkick_migrations").fetchall()
    return [*columns, *indexes, *[(str(v), n) for v, n in versions]]


def test_migrate_twice_applies_once(empty_dsn: str) -> None:
    with JobStore.open(empty_dsn) as store:
        first = schema.migrate(store)
        second = schema.migrate(store)
        assert schema.check(store) == schema.LATEST_VERSION
    assert first.applied == [v for v, _, _ in migration_scripts.MIGRATIONS]
    assert second.applied == []
    snapshot = schema_snapshot(empty_dsn)
    assert ("1", "jobs") in snapshot
    assert any(
        row[0] == "jobs_ready_idx" and "WHERE (status = 'queued'" in row[1] for row in snapshot
    )


def test_two_migrators_racing_leave_one_schema(empty_dsn: str, template_db: str, dsn: str) -> None:
    """Both start while a third session holds the lock, so they truly contend."""
    results: list[schema.MigrationReport] = []
    errors: list[BaseException] = []
    with psycopg.connect(empty_dsn) as gate:
        with JobStore(gate).transaction():
            JobStore(gate).lock_migrations()

            def run() -> None:
                try:
                    with JobStore.open(empty_dsn) as store:
                        results.append(schema.migrate(store))
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=run) for _ in range(2)]
            for thread in threads:
                thread.start()
            wait_for_lock_waiters(empty_dsn, count=2)  # both blocked on the lock: the race is set
        for thread in threads:
            thread.join(30)
    assert not errors, errors
    assert sorted(len(r.applied) for r in results) == [0, len(migration_scripts.MIGRATIONS)]
    assert schema_snapshot(empty_dsn) == schema_snapshot(dsn)  # same as the template's


def test_check_names_missing_and_newer_schemas(empty_dsn: str) -> None:
    with JobStore.open(empty_dsn) as store:
        with pytest.raises(schema.SchemaError, match=r"missing.*pgkick migrate"):
            schema.check(store)
        schema.migrate(store)
        store.conn.execute(
            "INSERT INTO pgkick.pgkick_migrations (version, name) VALUES (999, 'future')"
        )
        with pytest.raises(schema.SchemaError, match="version 999, newer than this code"):
            schema.check(store)
        with pytest.raises(schema.SchemaError, match="newer"):
            schema.migrate(store)


def test_bundled_queries_match_sql_folder() -> None:
    assert bundle_sql.main(["--check"]) == 0


def test_bundle_check_catches_drift(tmp_path: Path) -> None:
    copy = tmp_path / "sql"
    shutil.copytree(ROOT / "sql", copy)
    claim = copy / "job_claim.sql"
    claim.write_text(claim.read_text().replace("job_claim(", "job_claim_renamed("))
    assert bundle_sql.render(copy) != (ROOT / "functions/pgkick/store/queries.py").read_text()


def test_every_runtime_statement_is_named_and_described() -> None:
    """Each sql/ file is one constant of the runtime's queries (tools/sql/ of the tooling's,
    never the runtime's), and its first line says what it does."""
    for folder, module in (("sql", queries), ("tools/sql", dev_queries)):
        files = sorted(p.stem for p in (ROOT / folder).glob("*.sql"))
        constants = sorted(
            n.lower()
            for n in vars(module)
            if n.isupper() and n not in ("MIGRATIONS", "MIGRATION_VERSIONS")
        )
        assert files == constants, folder
        for name in files:
            first = getattr(module, name.upper()).splitlines()[0]
            assert first.startswith(f"-- {name}: ") and len(first) > len(name) + 15


def test_cli_migrate_reports_json_and_errors_in_one_line(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pgkick import cli

    assert cli.main(["migrate", "--dsn", empty_dsn, "--json"]) == 0
    versions = [version for version, _, _ in migration_scripts.MIGRATIONS]
    assert json.loads(capsys.readouterr().out) == {
        "applied": versions,
        "version": versions[-1],
        "schema": "pgkick",
    }
    assert cli.main(["migrate", "--dsn", "postgresql://nobody@127.0.0.1:1/none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pgkick migrate: cannot connect to PostgreSQL") and err.count("\n") == 1


def test_two_installs_hold_neither_the_others_flow_nor_claim_lock(empty_dsn: str) -> None:
    """Catches the advisory lock keys of the claim and of debounce/throttle naming the queue or
    the key but not the schema: advisory locks are the database's, so an app transaction of
    install `a` holding a debounced key stalled install `b`'s debounce of the same key (another
    app) until it ended, and `a`'s claim of a limited queue held `b`'s claim of its namesake.
    b's session gives up on a lock after 1 s (lock_timeout): it must never meet one of a's."""
    for name in ("a", "b"):
        with JobStore.open(empty_dsn, schema=name) as store:
            schema.migrate(store)
            groups.set_queue_limit(store, "q", 5)
            store.insert(job_spec({}, task="noop", queue="q"))
    with (
        psycopg.connect(empty_dsn) as a_conn,
        psycopg.connect(empty_dsn, autocommit=True) as b_conn,
    ):
        b_conn.execute("SET lock_timeout = '1s'")
        a, b = JobStore(a_conn, schema="a"), JobStore(b_conn, schema="b")
        with a.transaction():  # app A's open transaction: both locks held until it ends
            a.insert_unique(job_spec({"n": 1}, task="noop", unique_key="k", debounce=30))
            assert len(a.claim("q", batch=1, lease=LEASE)) == 1
            b.insert_unique(job_spec({"n": 2}, task="noop", unique_key="k", debounce=30))
            assert len(b.claim("q", batch=1, lease=LEASE)) == 1
