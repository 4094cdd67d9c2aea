"""Schema migrations: apply what is missing, once, even when several migrators race.

Why an advisory *transaction* lock: it is released at commit or rollback, so it
works through transaction-mode poolers and never outlives a crashed migrator.
Each migration runs in the same transaction as its version record, so a
failure leaves the schema exactly as it was.

Every pgkick object lives in its own schema (`pgkick`, or PGKICK_SCHEMA / `pgkick
migrate --schema`), created here if missing. Migrations are written with
unqualified names and run under `SET LOCAL search_path` (transaction-scoped,
so pooler-safe): 0001-0003 create their tables in the schema on a fresh install.

An install from before 0006 has its tables (jobs, queue_watchers,
pgkick_migrations) in the connecting role's default schema, usually public.
Why the move comes first, before any other pending migration, rather than in
version order: migrations after 0003 (0004, 0005, and any later one) are
written for the new layout, and a move done first leaves every one of them a
single layout to run against, qualified or not. Why a numbered migration
rather than an unrecorded adoption step: the ledger says the move happened,
and a fresh install runs the same script in order, where it finds nothing to
move. The old install is found by its ledger (`pgkick_migrations` visible
through the session's own search_path, outside the target schema, with none in
the target), never by a table named `jobs`, which could be the app's own.
Everything (move, pending migrations, their records) is one transaction:
an error leaves the old layout as it was, every row in place.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

from pgkick.connections.qualify import quote
from pgkick.errors import SchemaError
from pgkick.store import queries
from pgkick.store.worker import JobStore

LATEST_VERSION = queries.MIGRATIONS[-1][0]
OWN_SCHEMA_VERSION = 6  # 0006_own_schema: moves an older install's tables into the schema


@dataclass(frozen=True, slots=True)
class MigrationReport:
    applied: list[int]
    version: int


def migrate(store: JobStore) -> MigrationReport:
    """Apply every migration not yet recorded, in order, in one transaction, in the store's
    schema; an install from before 0006 is first moved there (see the module's docstring)."""
    applied = []
    with store.transaction():
        store.lock_migrations()
        store.create_schema()
        legacy = store.legacy_schema()  # before search_path changes: the session's own
        if legacy is not None:
            store.set_migration_path(f"{quote(store.schema)}, {quote(legacy)}")
            store.apply_migration(*_migration(OWN_SCHEMA_VERSION))
            applied.append(OWN_SCHEMA_VERSION)
        store.set_migration_path(quote(store.schema))
        store.create_migration_table()
        done = set(store.applied_versions())
        _refuse_newer(done)
        for version, name, script in queries.MIGRATIONS:
            if version not in done:
                store.apply_migration(version, name, script)
                applied.append(version)
        if applied and store.roles_set_up():
            # New columns and tables need their grants: roles set up before this upgrade
            # keep working without `migrate --roles` (which also creates missing roles).
            store.setup_roles()
    return MigrationReport(applied=applied, version=LATEST_VERSION)


def _migration(version: int) -> tuple[int, str, LiteralString]:
    (found,) = [m for m in queries.MIGRATIONS if m[0] == version]
    return found


def create_roles(store: JobStore) -> list[str]:
    """Create (if missing) and grant the least-privilege roles; needs CREATEROLE."""
    with store.transaction():
        store.lock_migrations()
        store.setup_roles()
    return ["pgkick_producer", "pgkick_worker", "pgkick_maintainer"]


def check(store: JobStore) -> int:
    """Fail clearly unless the schema is exactly the one this code was written for."""
    done = set(store.applied_versions())
    if not done:
        legacy = store.legacy_schema()
        if legacy is not None:
            raise SchemaError(
                f"pgkick's tables are in schema {legacy!r} (a layout from before version "
                f"{OWN_SCHEMA_VERSION}): run `pgkick migrate` to move them into {store.schema!r}"
            )
        raise SchemaError(
            f"pgkick's schema is missing from this database (looked in schema "
            f"{store.schema!r}): run `pgkick migrate` (or `pgkick.migrate(dsn)` from Python)"
        )
    _refuse_newer(done)
    missing = sorted({v for v, _, _ in queries.MIGRATIONS} - done)
    if missing:
        raise SchemaError(
            f"pgkick's schema is behind this code (missing versions {missing}): "
            "run `pgkick migrate`"
        )
    return LATEST_VERSION


@contextmanager
def open_checked(dsn: str, **options: Any) -> Iterator[JobStore]:
    """A store on its own connection, refusing a database whose schema does not match."""
    with JobStore.open(dsn, **options) as store:
        check(store)
        yield store


def _refuse_newer(done: set[int]) -> None:
    newer = sorted(v for v in done if v > LATEST_VERSION)
    if newer:
        raise SchemaError(
            f"the database has pgkick schema version {newer[-1]}, newer than this code "
            f"knows ({LATEST_VERSION}): deploy the newer pgkick instead"
        )
