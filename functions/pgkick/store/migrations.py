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
the target), never by a table named `jobs`, which could be the app's own; and a
ledger that records 0006 is no old install but another one, made or moved there
since (`--schema public`): the new install is made beside it, nothing moves.
Everything (move, pending migrations, their records) is one transaction:
an error leaves the old layout as it was, every row in place.

The migration statements are `MigrationStore`'s, a store of their own: migrate and
check take any store (the CLI's, a worker's at cold start) and run them on its
connection, so no role's store carries them.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, LiteralString, NamedTuple

from pgkick.config import DEFAULT_SCHEMA
from pgkick.connections.db import Database
from pgkick.connections.qualify import quote
from pgkick.errors import ConfigError, SchemaError
from pgkick.store import queries

LATEST_VERSION = queries.MIGRATION_VERSIONS[-1]
OWN_SCHEMA_VERSION = 6  # 0006_own_schema: moves an older install's tables into the schema


class MigrationReport(NamedTuple):
    """What a migration run did: the versions it applied (none if the schema was current)
    and the schema's version after it."""

    applied: list[int]
    version: int


class MigrationStore(Database):
    """The ledger's statements, the schema's creation, the roles' set-up."""

    @classmethod
    def on(cls, db: Database) -> "MigrationStore":
        """The migration statements on another store's connection, schema and clock."""
        return db if isinstance(db, MigrationStore) else cls(db.conn, db.clock, schema=db.schema)

    def lock_migrations(self) -> None:
        self.rows(queries.MIGRATION_LOCK)

    def create_migration_table(self) -> None:
        self.execute(queries.MIGRATION_TABLE_CREATE)

    def applied_versions(self) -> list[int]:
        if not self.one(queries.MIGRATION_TABLE_EXISTS)[0]:
            return []
        return [row[0] for row in self.rows(queries.MIGRATION_LIST_APPLIED)]

    def setup_roles(self) -> None:
        self.execute(queries.ROLE_SETUP)

    def roles_set_up(self) -> bool:
        """pgkick's three roles exist (an earlier `migrate --roles` made them)."""
        return bool(self.one(queries.ROLE_SETUP_DONE)[0])

    def apply_migration(self, version: int, name: str, script: LiteralString) -> None:
        self.execute(script)
        self.execute(queries.MIGRATION_RECORD, version=version, name=name)

    def create_schema(self) -> None:
        self.execute(queries.SCHEMA_CREATE)

    def ledger_elsewhere(self) -> tuple[str, bool] | None:
        """The schema of a ledger the session's own search_path finds outside this store's
        schema (which has none), and whether it is an install from before 0006 (to move)
        rather than another install, made or moved there since: its ledger records 0006."""
        row = self.execute(queries.MIGRATION_TABLE_LEGACY).fetchone()
        if row is None:
            return None
        found = str(row[0])
        try:
            ledger = MigrationStore(self.conn, self.clock, schema=found)
        except ConfigError:  # a name pgkick refuses: no install since 0006 was made there
            return found, True
        return found, OWN_SCHEMA_VERSION not in ledger.applied_versions()

    def legacy_schema(self) -> str | None:
        """Where an install from before 0006 keeps its tables (None: not such an install)."""
        elsewhere = self.ledger_elsewhere()
        return elsewhere[0] if elsewhere and elsewhere[1] else None

    def set_migration_path(self, path: str) -> None:
        """search_path until the end of this transaction (`path` as SET would take it)."""
        self.execute(queries.MIGRATION_SEARCH_PATH_SET, path=path)


def migrate(db: Database) -> MigrationReport:
    """Apply every migration not yet recorded, in order, in one transaction, in the store's
    schema; an install from before 0006 is first moved there (see the module's docstring)."""
    store = MigrationStore.on(db)
    applied = []
    with store.transaction():
        store.lock_migrations()
        store.create_schema()
        legacy = store.legacy_schema()  # before search_path changes: the session's own
        if legacy is not None:
            store.set_migration_path(f"{quote(store.schema)}, {quote(legacy)}, pg_temp")
            store.apply_migration(*_migration(OWN_SCHEMA_VERSION))
            applied.append(OWN_SCHEMA_VERSION)
        # pg_temp last, named: unnamed, it is searched first, and every function a
        # migration makes takes this path (SET search_path FROM CURRENT; 0025 says why)
        store.set_migration_path(f"{quote(store.schema)}, pg_temp")
        store.create_migration_table()
        done = set(store.applied_versions())
        _refuse_newer(done)
        for version, name, script in _scripts():
            if version not in done:
                store.apply_migration(version, name, script)
                applied.append(version)
        if applied and store.roles_set_up():
            # New columns and tables need their grants: roles set up before this upgrade
            # keep working without `migrate --roles` (which also creates missing roles).
            store.setup_roles()
    return MigrationReport(applied=applied, version=LATEST_VERSION)


def _scripts() -> tuple[tuple[int, str, LiteralString], ...]:
    """The migrations' scripts, loaded only to migrate: a handler checks versions alone, and
    the Lambda artifact leaves the scripts out (they are a sixth of the runtime's bytes)."""
    try:
        from pgkick.store.migration_scripts import MIGRATIONS
    except ModuleNotFoundError:  # the Lambda artifact: migrating is an operator's step
        raise SchemaError(
            "this pgkick ships without its migrations (a Lambda artifact): run `pgkick "
            "migrate` from a machine where pgkick is installed"
        ) from None
    return MIGRATIONS


def _migration(version: int) -> tuple[int, str, LiteralString]:
    (found,) = [m for m in _scripts() if m[0] == version]
    return found


def create_roles(db: Database) -> list[str]:
    """Create (if missing) and grant the least-privilege roles; needs CREATEROLE."""
    store = MigrationStore.on(db)
    with store.transaction():
        store.lock_migrations()
        store.setup_roles()
    return ["pgkick_producer", "pgkick_worker", "pgkick_maintainer"]


def check(db: Database) -> int:
    """Fail clearly unless the schema is exactly the one this code was written for."""
    store = MigrationStore.on(db)
    done = set(store.applied_versions())
    if not done:
        elsewhere = store.ledger_elsewhere()
        if elsewhere is not None and elsewhere[1]:
            raise SchemaError(
                f"pgkick's tables are in schema {elsewhere[0]!r} (a layout from before version "
                f"{OWN_SCHEMA_VERSION}): run `pgkick migrate` to move them into {store.schema!r}"
            )
        there = (
            f" (pgkick is installed in schema {elsewhere[0]!r}: to use it, pass --schema "
            f"{elsewhere[0]} or set PGKICK_SCHEMA={elsewhere[0]})"
            if elsewhere
            else ""
        )
        raise SchemaError(
            f"pgkick's schema is missing from this database (looked in schema "
            f"{store.schema!r}): run {_migrate_command(store.schema)} (or `pgkick.migrate(dsn)` "
            "from Python)" + there
        )
    _refuse_newer(done)
    missing = sorted(set(queries.MIGRATION_VERSIONS) - done)
    if missing:
        raise SchemaError(
            f"pgkick's schema is behind this code (missing versions {missing}): "
            f"run {_migrate_command(store.schema)}"
        )
    return LATEST_VERSION


def _migrate_command(schema: str) -> str:
    """The command that migrates this schema: `pgkick migrate` alone migrates the default one
    (or PGKICK_SCHEMA's), not the one a `--schema` named (a review of the CLI, F6)."""
    return "`pgkick migrate`" if schema == DEFAULT_SCHEMA else f"`pgkick migrate --schema {schema}`"


@contextmanager
def open_checked[S: Database](store_class: type[S], dsn: str, **options: Any) -> Iterator[S]:
    """A store on its own connection, refusing a database whose schema does not match."""
    with store_class.open(dsn, **options) as store:
        check(store)
        yield store


def _refuse_newer(done: set[int]) -> None:
    newer = sorted(v for v in done if v > LATEST_VERSION)
    if newer:
        raise SchemaError(
            f"the database has pgkick schema version {newer[-1]}, newer than this code "
            f"knows ({LATEST_VERSION}): deploy the newer pgkick instead"
        )
