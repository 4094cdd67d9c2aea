"""The databases of pgkick's pytest plugin: one server, a migrated template, a copy per test.

Why a database per test, copied from a template: a job an earlier test left
(queued, failed, holding a unique key) must not be seen by the next one, and
inline mode commits for real (its worker uses connections of its own), so a
rolled-back transaction cannot isolate it. `CREATE DATABASE ... TEMPLATE` copies
a migrated database in tens of milliseconds, the app's own tables included when
the app creates them in the template (the plugin's `pgkick_setup_template`).
This is how pgkick's own suite isolates its tests (tests/conftest.py).

Where the server comes from, in order: PGKICK_TEST_DATABASE_URL, DATABASE_URL
(either needs a role allowed to CREATE DATABASE; the app's database itself is
never written: only databases named `pgkick_test_*`, dropped after use, or by the
next session when this one is killed: pgkick.testing.leftovers), or the
embedded PostgreSQL of the development tooling (pgkick-dev, found through the
entry point `pgkick.test_servers`, as the runtime finds its other tools), started
in a temporary folder for the session.

Why the statements name placeholder databases (sql/database_*.sql): every
statement pgkick runs comes from sql/, and a database name cannot be a bound
parameter. The only text put in their place is a name made here, checked
against NAME and quoted, as pgkick.connections.qualify does for schemas.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import LiteralString

from pgkick import config
from pgkick.connections.db import Database, dsn_for_database
from pgkick.connections.qualify import quote
from pgkick.errors import ConfigError, InvalidArgument, RoleRefused
from pgkick.store import queries
from pgkick.testing import leftovers

NAME = re.compile(r"pgkick_test_[a-z0-9_]{1,40}")
INSUFFICIENT_PRIVILEGE = "42501"  # the server's SQLSTATE for a privilege the role lacks
_PLACEHOLDER = re.compile(r"\bpgkick_test_(db|template)\b")


def _named(statement: LiteralString, **names: str) -> LiteralString:
    """`statement` with its placeholder databases (`db`, `template`) named."""
    for name in names.values():
        if not NAME.fullmatch(name):
            raise InvalidArgument(f"not a database name pgkick.testing made: {name!r}")
    # mypy reads LiteralString as str; the text spliced in is a generated, checked,
    # quoted name (NAME), never input
    return _PLACEHOLDER.sub(lambda m: quote(names[m[1]]), statement)


def new_name(kind: str) -> str:
    """A database name of `kind`, with the running session's number when there is one: the
    next session drops it if this one dies before its teardown (pgkick.testing.leftovers)."""
    session = leftovers.current()
    marked = f"{session}_" if session else ""
    return f"pgkick_test_{kind}_{marked}{uuid.uuid4().hex[:12]}"


def source() -> str:
    """Where server() takes its server from, for an error to name: the setting, or the tooling."""
    setting = config.test_database_setting()
    return f"the server {setting} names" if setting else "pgkick-dev's embedded PostgreSQL"


@contextmanager
def server() -> Iterator[str]:
    """A DSN of a server where databases may be created, for the test session."""
    dsn = config.test_database_url()
    if dsn:
        yield dsn
        return
    found = entry_points(group="pgkick.test_servers", name="embedded")  # pgkick-dev's
    if not found:
        raise ConfigError(
            "pgkick's pytest fixtures need a PostgreSQL server: set DATABASE_URL (or "
            "PGKICK_TEST_DATABASE_URL) to one whose role may CREATE DATABASE, or install "
            "the development tooling pgkick-dev for an embedded one"
        )
    with next(iter(found)).load()() as dsn:
        yield dsn


def create_template(server_dsn: str, setup: Callable[[str], object]) -> str:
    """A new database migrated by pgkick, then handed to `setup` (the app's own tables);
    returns its name. Nobody may stay connected to it: it is copied for every test."""
    from pgkick import migrate  # the public entry point, as an app would call it

    name = new_name("template")
    with _creating(server_dsn) as admin:
        admin.execute(_named(queries.DATABASE_CREATE, db=name))
    try:
        dsn = dsn_for_database(server_dsn, name)
        migrate(dsn)
        setup(dsn)
    except BaseException:
        drop(server_dsn, name)
        raise
    return name


@contextmanager
def copy_of(server_dsn: str, template: str) -> Iterator[str]:
    """A database of this test's own, copied from `template`; dropped after it."""
    name = new_name("db")
    with _creating(server_dsn) as admin:
        admin.execute(_named(queries.DATABASE_CLONE, db=name, template=template))
    try:
        yield dsn_for_database(server_dsn, name)
    finally:
        drop(server_dsn, name)


@contextmanager
def _creating(server_dsn: str) -> Iterator[Database]:
    """The server's connection to CREATE DATABASE on; a role that may not is RoleRefused
    saying what to do (the driver's InsufficientPrivilege named neither CREATEDB nor the
    setting)."""
    with Database.open(server_dsn, application_name="pgkick-testing") as admin:
        try:
            yield admin
        except Exception as exc:
            if getattr(exc, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
                raise
            reason = (str(exc).splitlines() or [""])[0]
            raise RoleRefused(
                f"{reason}: pgkick's test databases are made on {source()}, whose role needs "
                "CREATEDB (`ALTER ROLE ... CREATEDB`); or set PGKICK_TEST_DATABASE_URL to a "
                "server where it has it"
            ) from None


def drop(server_dsn: str, name: str) -> None:
    with Database.open(server_dsn, application_name="pgkick-testing") as admin:
        admin.execute(_named(queries.DATABASE_DROP, db=name))
