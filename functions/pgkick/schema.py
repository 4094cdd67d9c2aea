"""Schema migrations: apply what is missing, once, even when several migrators race.

Why an advisory *transaction* lock: it is released at commit or rollback, so it
works through transaction-mode poolers and never outlives a crashed migrator.
Each migration runs in the same transaction as its version record, so a
failure leaves the schema exactly as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pgkick import queries
from pgkick.errors import SchemaError
from pgkick.store import JobStore

LATEST_VERSION = queries.MIGRATIONS[-1][0]


@dataclass(frozen=True, slots=True)
class MigrationReport:
    applied: list[int]
    version: int


def migrate(store: JobStore) -> MigrationReport:
    """Apply every migration not yet recorded, in order, in one transaction."""
    with store.transaction():
        store.lock_migrations()
        store.create_migration_table()
        done = set(store.applied_versions())
        _refuse_newer(done)
        applied = []
        for version, name, script in queries.MIGRATIONS:
            if version not in done:
                store.apply_migration(version, name, script)
                applied.append(version)
    return MigrationReport(applied=applied, version=LATEST_VERSION)


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
        raise SchemaError("pgkick's schema is missing from this database: run `pgkick migrate`")
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
