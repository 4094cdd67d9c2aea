"""`pgkick migrate --roles` on several databases of one cluster at once.

Roles live in the cluster, not in a database: the per-database migration lock
does not serialise two databases' role set-ups, so both may try to create the
same role.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgkick.store import migrations as schema
from tests.store import JobStore

ROLES = ("pgkick_maintainer", "pgkick_worker", "pgkick_producer")


def drop_pgkick_roles(server_dsn: str) -> None:
    """Remove the roles and every privilege they hold, in whichever database holds one."""
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        holders = admin.execute(
            "SELECT DISTINCT d.datname FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid"
            " WHERE s.refobjid IN (SELECT oid FROM pg_roles WHERE rolname = ANY(%s))",
            [list(ROLES)],
        ).fetchall()
    for (name,) in holders:
        with psycopg.connect(make_conninfo(server_dsn, dbname=name), autocommit=True) as db:
            db.execute(f"DROP OWNED BY {', '.join(ROLES)}")
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for role in ROLES:
            admin.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture
def databases(server_dsn: str, template_db: str) -> Iterator[list[str]]:
    names = [f"roles_{uuid.uuid4().hex[:10]}" for _ in range(4)]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {template_db}")
    yield [make_conninfo(server_dsn, dbname=name) for name in names]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        for name in names:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_role_setup_on_several_databases_at_once(server_dsn: str, databases: list[str]) -> None:
    """Catches roles created without cluster-wide care: with the roles absent, four
    databases' `migrate --roles` started together (a barrier) raced on CREATE ROLE and one
    failed with a duplicate key on pg_authid. Every round, every database must succeed."""
    for _ in range(6):
        drop_pgkick_roles(server_dsn)
        barrier = threading.Barrier(len(databases))
        errors: list[BaseException] = []

        def migrate_roles(
            dsn: str, barrier: threading.Barrier = barrier, errors: list[BaseException] = errors
        ) -> None:
            try:
                with JobStore.open(dsn) as store:
                    barrier.wait(10)
                    schema.create_roles(store)
            except BaseException as exc:  # reported below, with the round's other failures
                errors.append(exc)

        threads = [threading.Thread(target=migrate_roles, args=(dsn,)) for dsn in databases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
    for dsn in databases:  # and each database got its grants
        with psycopg.connect(dsn) as conn:
            granted = conn.execute(
                "SELECT has_any_column_privilege('pgkick_producer', 'pgkick.jobs', 'INSERT')"
            ).fetchone()
            assert granted == (True,)
