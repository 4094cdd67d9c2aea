"""An upgraded install is a fresh one: released migrations are never edited, and 0034 brings
an install migrated before the edits made to 0015, 0017, 0022 and 0026 to what they make now.

Why: the ledger records versions, not texts, so a database that applied a migration never
runs it again, whatever its file says later. Four were edited in place on main (a review of
migrations found each on a database upgraded from main's older states): such an install
reported the latest version and kept an older job_await (that took another app's job as a
child), a leftover five-argument job_await its roles could call, the unique index that let
a waiting job's key be taken twice, and the first design's dependants trigger.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick.store import migration_scripts
from pgkick.store import migrations as schema
from tests.store import JobStore

MIGRATIONS = Path(__file__).parent.parent / "sql" / "migrations"
HASHES = Path(__file__).parent / "migration_hashes.txt"
ROLE_SETUP_GRANT = "^pgkick_(producer|worker|maintainer)="
REPAIR = "edited_migrations_reapplied"  # 0034's name (its number may change at a merge)

# What such an install kept, rebuilt here (the old texts are in git: 0017 at 6cf9dc1, 0026
# at 20bd486, 0022 at 7f70b72, 0015 at dc318dd); the stubs' bodies stand for the old ones,
# which any fix must replace whatever they say.
STALE = """
ALTER TABLE job_dependencies ADD COLUMN attempt int;
CREATE FUNCTION job_await(child_ids bigint[], parent_ids bigint[], policies text[],
                          attempts int[], await_now timestamptz)
RETURNS TABLE (id bigint) LANGUAGE sql VOLATILE SECURITY DEFINER
AS 'SELECT NULL::bigint WHERE false';
CREATE OR REPLACE FUNCTION job_await(child_ids bigint[], parent_ids bigint[], policies text[],
                                     await_now timestamptz)
RETURNS TABLE (id bigint) LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT AS $$ BEGIN RETURN; END $$;
CREATE OR REPLACE FUNCTION job_dependants_settle() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$ BEGIN RETURN NULL; END $$;
CREATE OR REPLACE FUNCTION job_ready_fair_count(ready_queue text, at timestamptz, up_to int)
RETURNS bigint LANGUAGE sql STABLE AS 'SELECT 0::bigint';
DROP TRIGGER jobs_dependants_settle ON jobs;
CREATE TRIGGER jobs_dependants_settle AFTER UPDATE OF status ON jobs
FOR EACH ROW WHEN (NEW.has_dependants AND OLD.status IS DISTINCT FROM NEW.status
                   AND (NEW.status IN ('done', 'failed') OR OLD.status = 'running'))
EXECUTE FUNCTION job_dependants_settle();
DROP INDEX jobs_unique_live_idx;
CREATE UNIQUE INDEX jobs_unique_live_idx ON jobs (unique_key)
  WHERE unique_key IS NOT NULL AND status IN ('queued', 'running');
"""


def catalog(dsn: str) -> dict[tuple[str, ...], Any]:
    """What the migrations make in schema pgkick: columns, indexes, constraints, triggers,
    functions (their text, rights and grants but role_setup's: its roles are the cluster's,
    dropped and made again by other tests while this one runs)."""
    found: dict[tuple[str, ...], Any] = {}
    with psycopg.connect(dsn) as conn:
        for row in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'pgkick'"
        ):
            found["column", row[0], row[1]] = row[2:]
        for row in conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'pgkick'"
        ):
            found["index", row[0]] = row[1]
        for row in conn.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            " FROM pg_constraint WHERE connamespace = 'pgkick'::regnamespace"
        ):
            found["constraint", row[0], row[1]] = row[2]
        for row in conn.execute(
            "SELECT t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid)"
            " FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE c.relnamespace = 'pgkick'::regnamespace AND NOT t.tgisinternal"
        ):
            found["trigger", row[0], row[1]] = row[2]
        for row in conn.execute(
            "SELECT oid::regprocedure::text, pg_get_functiondef(oid),"
            " array(SELECT a FROM unnest(proacl) AS a WHERE a::text !~ %s)::text"
            " FROM pg_proc WHERE pronamespace = 'pgkick'::regnamespace",
            (ROLE_SETUP_GRANT,),
        ):
            found["function", row[0]] = row[1:]
    return found


def differences(fresh: dict[Any, Any], other: dict[Any, Any]) -> list[tuple[str, ...]]:
    return sorted(k for k in set(fresh) | set(other) if fresh.get(k) != other.get(k))


def install_before_repair(store: JobStore) -> None:
    """Every migration before 0034 applied, as `migrate` applies them (all of them when
    there is no 0034: the install is then as current as this code can make it)."""
    repair = [v for v, name, _ in migration_scripts.MIGRATIONS if name == REPAIR]
    with store.transaction():
        store.create_schema()
        store.set_migration_path("pgkick, pg_temp")
        store.create_migration_table()
        for version, name, script in migration_scripts.MIGRATIONS:
            if not repair or version < repair[0]:
                store.apply_migration(version, name, script)


def test_an_install_migrated_before_the_edits_is_upgraded_to_a_fresh_one(
    empty_dsn: str, dsn: str
) -> None:
    with JobStore.open(empty_dsn) as store:
        install_before_repair(store)
        with store.transaction():
            store.set_migration_path("pgkick, pg_temp")
            store.execute(STALE)  # type: ignore[arg-type]  # a test's own DDL
        assert differences(catalog(dsn), catalog(empty_dsn))  # the stale install differs
        schema.migrate(store)
        assert schema.check(store) == schema.LATEST_VERSION
        schema.create_roles(store)  # on both: whether the cluster had the roles, set aside
    with JobStore.open(dsn) as fresh:
        schema.create_roles(fresh)
    assert differences(catalog(dsn), catalog(empty_dsn)) == []


def test_the_repair_changes_nothing_on_a_current_install(empty_dsn: str) -> None:
    """0034's copies are the newest definitions before it (a merge that puts a migration
    redefining one of them before 0034 must update 0034's copy), and cost a fresh install
    no rebuild."""
    (repair,) = [m for m in migration_scripts.MIGRATIONS if m[1] == REPAIR]
    with JobStore.open(empty_dsn) as store:
        install_before_repair(store)
        before = catalog(empty_dsn)
        with store.transaction():
            store.set_migration_path("pgkick, pg_temp")
            store.apply_migration(*repair)
    assert differences(before, catalog(empty_dsn)) == []


def test_live_keys_taken_twice_stop_the_repair_in_words(empty_dsn: str) -> None:
    """The old index let a waiting job and a queued one hold one key: the unique index
    cannot be rebuilt over both, and the operator is told which jobs, before any change."""
    with JobStore.open(empty_dsn) as store:
        install_before_repair(store)
        with store.transaction():
            store.set_migration_path("pgkick, pg_temp")
            store.execute(STALE)  # type: ignore[arg-type]
            store.execute(
                "INSERT INTO jobs (queue, task, payload, unique_key, status, waiting_on)"
                " VALUES ('q', 't', '{}', 'k-1', 'queued', 0), ('q', 't', '{}', 'k-1',"
                " 'waiting', 1)"
            )
        with pytest.raises(psycopg.Error, match=r"unique key 'k-1' is held by jobs 1, 2") as exc:
            schema.migrate(store)
        assert "pgkick cancel" in str(exc.value)
        assert "attempt" in [k[2] for k in catalog(empty_dsn) if k[0] == "column"]


def test_released_migrations_are_never_edited() -> None:
    """A database that applied a migration never runs it again: an edit reaches fresh
    installs only, and upgraded ones differ from them for ever, silently."""
    recorded = dict(line.split()[::-1] for line in HASHES.read_text().splitlines() if line)
    for path in sorted(MIGRATIONS.glob("*.sql")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert path.name in recorded, (
            f"{path.name} is a new migration: add the line '{digest}  {path.name}' to {HASHES}"
        )
        assert recorded[path.name] == digest, (
            f"{path.name} was edited after its release, but a database that applied it never "
            f"runs it again: restore it (git checkout main -- sql/migrations/{path.name}) "
            "and write a new migration that brings installs to the new definition (0034 "
            "shows how). Only if it was never released (it is new on your branch) may its "
            f"line in {HASHES.name} change, to '{digest}  {path.name}'"
        )
    assert sorted(recorded) == sorted(p.name for p in MIGRATIONS.glob("*.sql")), (
        f"{HASHES.name} lists a migration that is gone: migrations are never removed"
    )
