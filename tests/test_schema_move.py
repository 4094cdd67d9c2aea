"""Upgrading an install from before 0006 (tables in public) into pgkick's own schema, and
a custom schema working through a transaction-mode PgBouncer."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import pgkick
from pgkick import cli
from pgkick.config import Settings
from pgkick.kick.kickers import NoKicker
from pgkick.store import migration_scripts
from pgkick.store import migrations as schema
from pgkick.validation import job_spec
from pgkick.worker.runtime import Runtime
from pgkick_dev.embedded import EmbeddedPostgres
from tests.pgbouncer import pgbouncer, requires_pgbouncer
from tests.store import JobStore

# What pgkick before 0006 ran: its ledger, then 0001-0003, all in the role's default schema.
LEGACY_LEDGER = """
CREATE TABLE pgkick_migrations (
  version    int         PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)"""
LEASE = timedelta(minutes=5)
LEGACY_ROLE_SETUP = Path(__file__).parent / "legacy_role_setup.sql"


def legacy_install(dsn: str) -> None:
    """A database as pgkick left it before 0006, holding jobs in every state."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(LEGACY_LEDGER)
        for version, name, script in migration_scripts.MIGRATIONS:
            if version <= 3:
                conn.execute(script)
                conn.execute("INSERT INTO pgkick_migrations VALUES (%s, %s)", (version, name))
        conn.execute(
            "INSERT INTO jobs (queue, task, payload, status, attempts, max_attempts,"
            " locked_until, claimed_at, last_error, finished_at, run_at) VALUES"
            " ('mail', 'noop', '{\"to\": \"a@example.com\"}', 'queued', 0, 5,"
            "  NULL, NULL, NULL, NULL, now() - interval '1 minute'),"
            " ('mail', 'noop', '{\"n\": 2, \"deep\": [1, {\"x\": null}]}', 'running', 2, 5,"
            "  now() + interval '4 minutes', now() - interval '1 minute', 'lease expired',"
            "  NULL, now() - interval '2 minutes'),"
            " ('mail', 'noop', '\"done\"', 'done', 1, 5, NULL, now() - interval '1 hour',"
            "  NULL, now() - interval '59 minutes', now() - interval '1 hour'),"
            " ('mail', 'noop', '[3]', 'failed', 3, 3, NULL, now() - interval '1 hour',"
            "  'boom', now() - interval '1 hour', now() - interval '2 hours')"
        )
        conn.execute("DELETE FROM jobs WHERE id = 1")  # a gap: ids are kept, not renumbered
        conn.execute(
            "INSERT INTO jobs (queue, task, payload) VALUES ('mail', 'noop', '{\"after\": 1}')"
        )
        conn.execute(
            "INSERT INTO queue_watchers VALUES ('mail', 'kick', now() + interval '1 minute')"
        )


# The columns an install from before 0004 had: later migrations add their own.
LEGACY_JOB_COLUMNS = (
    "id, queue, task, payload, status, run_at, attempts, max_attempts, locked_until,"
    " last_error, created_at, finished_at, claimed_at"
)


def rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    columns = LEGACY_JOB_COLUMNS if table.endswith(".jobs") else "*"
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2").fetchall()


def test_migrate_moves_an_old_install_with_every_job_intact_and_the_runtime_works(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches an upgrade that creates fresh, empty tables in the schema beside the old ones
    (the app's jobs stranded in public, lost to the workers), or that copies rows and
    renumbers ids, drops leases or attempts, or restarts the id sequence. Jobs in every
    state (queued, running under a lease, done, failed) and the watchers must be
    identical after `pgkick migrate`, and the queue must run on them."""
    legacy_install(empty_dsn)
    jobs, watchers = rows(empty_dsn, "public.jobs"), rows(empty_dsn, "public.queue_watchers")
    assert sorted(j[4] for j in jobs) == ["done", "failed", "queued", "running"]

    assert cli.main(["migrate", "--dsn", empty_dsn, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    later = [
        v for v, _, _ in migration_scripts.MIGRATIONS if v > 3 and v != schema.OWN_SCHEMA_VERSION
    ]
    assert report["applied"] == [schema.OWN_SCHEMA_VERSION, *later]  # the move first

    assert rows(empty_dsn, "pgkick.jobs") == jobs
    # (queue, watcher, until): 0013's wake-up channel columns come after them, empty
    assert [row[:3] for row in rows(empty_dsn, "pgkick.queue_watchers")] == watchers
    with psycopg.connect(empty_dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public'"
        ).fetchone()
        ledger = conn.execute("SELECT version FROM pgkick.pgkick_migrations ORDER BY 1")
        assert [v for (v,) in ledger] == [v for v, _, _ in migration_scripts.MIGRATIONS]
    assert left == (0,)  # tables, indexes and the id sequence all moved

    with JobStore.open(empty_dsn) as store:
        assert schema.check(store) == schema.LATEST_VERSION
        running = next(j for j in jobs if j[4] == "running")
        assert store.extend(running[0], running[6], LEASE)  # its lease still fences
        assert store.complete(running[0], running[6])
        claimed = store.claim("mail", batch=10, lease=LEASE)
        assert sorted(j.id for j in claimed) == sorted(j[0] for j in jobs if j[4] == "queued")
        assert store.complete_many(claimed) == {j.id for j in claimed}
    new_id = pgkick.enqueue_and_kick(
        {}, task="noop", queue="mail", dsn=empty_dsn, kicker=NoKicker()
    )
    assert new_id > max(j[0] for j in jobs)  # the identity sequence moved with its table
    assert schema.migrate(JobStore(psycopg.connect(empty_dsn, autocommit=True))).applied == []


def test_a_worker_on_an_unmigrated_old_install_says_to_migrate(empty_dsn: str) -> None:
    """Catches the new code meeting an old install with only "schema is missing": the
    operator must learn the tables are there, in public, and that migrate moves them."""
    legacy_install(empty_dsn)
    with JobStore.open(empty_dsn) as store:
        with pytest.raises(schema.SchemaError, match=r"in schema 'public'.*pgkick migrate"):
            schema.check(store)


@requires_pgbouncer
def test_a_custom_schema_through_pgbouncer_with_a_polluted_search_path(
    empty_dsn: str, embedded_pg: EmbeddedPostgres | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a statement that finds pgkick's tables through a search_path: through a
    transaction-mode pooler a session SET lands on whichever server connection the pooler
    lent, so here a neighbour's `SET search_path TO nowhere` is on a pooled connection
    (2 of them) while pgkick migrates, enqueues, claims and completes in `app_queue`."""
    monkeypatch.setenv("PGKICK_SCHEMA", "app_queue")
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "0")
    os_user = embedded_pg.os_user if embedded_pg else None
    with pgbouncer(empty_dsn, os_user, pool_size=2) as pooled:
        pooled_dsn = make_conninfo(pooled, dbname=str(conninfo_to_dict(empty_dsn)["dbname"]))
        with psycopg.connect(pooled_dsn, autocommit=True) as neighbour:
            for _ in range(4):  # lands on both server connections, in turn
                neighbour.execute("SET search_path TO nowhere")
            with JobStore.open(pooled_dsn) as store:
                assert schema.migrate(store).applied == [
                    v for v, _, _ in migration_scripts.MIGRATIONS
                ]
            ids = [
                pgkick.enqueue_and_kick({"i": i}, task="noop", dsn=pooled_dsn, kicker=NoKicker())
                for i in range(6)
            ]
            with JobStore.open(pooled_dsn) as store:
                schema.check(store)
                claimed = store.claim("default", batch=10, lease=LEASE)
                assert store.complete_many(claimed) == set(ids)
                assert store.stats_by_queue()[0]["done"] == 6
                assert store.table_health()["n_live_tup"] is not None
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('pgkick')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM app_queue.jobs").fetchone() == (6,)


def test_roles_set_up_before_the_move_keep_working_without_setting_them_up_again(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches an upgrade that moves the tables but leaves the least-privilege roles
    without USAGE on the new schema: every producer and worker would fail with
    `permission denied for schema pgkick` until someone reran `migrate --roles`."""
    legacy_install(empty_dsn)
    suffix, made = uuid.uuid4().hex[:8], {}
    with psycopg.connect(empty_dsn, autocommit=True) as admin:
        admin.execute(LEGACY_ROLE_SETUP.read_text())  # the grants as pgkick made them then
        for part in ("producer", "worker"):
            name, password = f"app_{part}_{suffix}", f"pw-{uuid.uuid4().hex}"
            admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE pgkick_{part}")
            made[part] = make_conninfo(empty_dsn, user=name, password=password)
    try:
        assert cli.main(["migrate", "--dsn", empty_dsn]) == 0  # no --roles
        monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "0")
        pgkick.enqueue_and_kick(
            {}, task="noop", queue="mail", dsn=made["producer"], kicker=NoKicker()
        )
        settings = Settings.from_env({"PGKICK_KICKER": "none"})
        summary = Runtime(settings, NoKicker(), dsn=lambda: made["worker"]).drain(
            "mail", lambda: 60_000
        )
        assert summary.done == 2  # the old install's ready job and the new one
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as admin:
            for part in made:
                admin.execute(f"DROP OWNED BY app_{part}_{suffix}")
                admin.execute(f"DROP ROLE app_{part}_{suffix}")


def test_schema_public_keeps_an_old_install_where_it_is(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches migrate ignoring the schema it was given (creating `pgkick` and moving the
    tables there): `--schema public` is how an operator keeps the old layout."""
    legacy_install(empty_dsn)
    jobs = rows(empty_dsn, "public.jobs")
    assert cli.main(["migrate", "--dsn", empty_dsn, "--schema", "public", "--json"]) == 0
    assert schema.OWN_SCHEMA_VERSION in json.loads(capsys.readouterr().out)["applied"]
    assert rows(empty_dsn, "public.jobs") == jobs
    with JobStore.open(empty_dsn, schema="public") as store:
        assert schema.check(store) == schema.LATEST_VERSION
        assert [j.id for j in store.claim("mail", batch=10, lease=LEASE)] == [
            j[0] for j in jobs if j[4] == "queued"
        ]
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('pgkick')").fetchone() == (None,)


def test_a_second_install_beside_one_in_public_moves_nothing(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches an install in schema public (made or moved there since 0006, its ledger
    holding version 6) taken for one from before 0006 by a migrate for another schema:
    0006 moved public's tables, with the app's jobs, and failed recording its version
    with a raw duplicate-key error. The second install is made beside it; before, a check
    of schema b names the install in public (an operator who forgot --schema public)."""
    assert cli.main(["migrate", "--dsn", empty_dsn, "--schema", "public"]) == 0
    with JobStore.open(empty_dsn, schema="public") as store:
        kept = store.insert(job_spec({"i": 1}, task="noop")).id
    with JobStore.open(empty_dsn, schema="b") as store:
        with pytest.raises(schema.SchemaError, match=r"installed in schema 'public'.*--schema"):
            schema.check(store)
    capsys.readouterr()
    assert cli.main(["migrate", "--dsn", empty_dsn, "--schema", "b", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["applied"] == [v for v, _, _ in migration_scripts.MIGRATIONS]
    assert [row[0] for row in rows(empty_dsn, "public.jobs")] == [kept]
    for name in ("public", "b"):
        with JobStore.open(empty_dsn, schema=name) as store:
            assert schema.check(store) == schema.LATEST_VERSION
    assert rows(empty_dsn, "b.jobs") == []
