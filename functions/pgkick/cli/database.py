"""Which database a command works on, and its store there: one rule for every command.

Why apart from pgkick.cli.main: the job inspection commands (pgkick.cli.inspect) and
the operations need the same rule, and importing it from main tied the two modules in
a circle. --dsn, else what the handlers read (DATABASE_URL, else the secret
PGKICK_DATABASE_SECRET_ARN names); the schema is checked before a command runs.
"""

from __future__ import annotations

import argparse
from contextlib import AbstractContextManager

from pgkick import config
from pgkick.connections.db import Database, DatabaseError
from pgkick.errors import RoleRefused, UsageError
from pgkick.store import migrations
from pgkick.store.operator import OperatorStore

APPLICATION_NAME = "pgkick-cli"
INSUFFICIENT_PRIVILEGE = "42501"  # the server's SQLSTATE for a privilege the role lacks


def dsn(args: argparse.Namespace) -> str:
    """--dsn, else what the handlers read: DATABASE_URL, else PGKICK_DATABASE_SECRET_ARN's."""
    if args.dsn:
        return str(args.dsn)
    settings = config.app_settings()  # a bad setting (PGKICK_SCHEMA=Bad) is said as it is
    if not settings.database_url and not settings.database_secret_arn:
        raise UsageError(
            "no database: pass --dsn, or set DATABASE_URL or PGKICK_DATABASE_SECRET_ARN"
        )
    return settings.dsn()


def checked[S: Database](
    store_class: type[S], args: argparse.Namespace
) -> AbstractContextManager[S]:
    """A `store_class` on the command's database, whose schema matches (a clear error if it
    is missing or newer)."""
    return migrations.open_checked(
        store_class, dsn(args), schema=args.schema, application_name=APPLICATION_NAME
    )


def operator_store(args: argparse.Namespace) -> AbstractContextManager[OperatorStore]:
    """The store the commands that enqueue or act on jobs use, on a migrated database."""
    return checked(OperatorStore, args)


def role_refused(command: str, exc: BaseException) -> RoleRefused | None:
    """The server's refusal of a privilege the connected role lacks, with the role a command
    needs (None: another error). Why: 'permission denied for schema pgkick' alone named no
    way out; `pgkick reap` alone said which role to use (a review of the CLI, F4)."""
    if not isinstance(exc, DatabaseError) or exc.sqlstate != INSUFFICIENT_PRIVILEGE:
        return None
    if command == "migrate":
        fix = (
            "run `pgkick migrate` as the database's owner, or as a role that may create schemas "
            "in it (CREATE on the database; --roles also needs CREATEROLE)"
        )
    else:
        role = "pgkick_maintainer"
        if command == "enqueue":
            role = "pgkick_producer or pgkick_maintainer"
        fix = (
            f"connect as a role granted {role} (`pgkick migrate --roles` creates them; "
            "docs/deploy/roles.md)"
        )
    return RoleRefused(f"{exc.diag.message_primary or exc}: {fix}")
