"""The schema's name in statements: the token-safe rewrite, the name's check, and every
runtime statement naming pgkick's schema (none relies on a search_path)."""

from __future__ import annotations

import re

import pytest

from pgkick import cli, config
from pgkick.connections.qualify import qualify
from pgkick.store import migration_scripts, queries

CREATED = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)
# A table name where a table is read or written, not preceded by a schema and a dot.
UNQUALIFIED = r"(?<![\w.$\"]){name}(?![\w$\".])"


def test_the_rewrite_touches_the_identifier_only() -> None:
    """Catches a plain text replace: it would rename the roles (pgkick_worker), change the
    migration lock's key ('pgkick.migrate'), or rewrite comments and DO bodies."""
    sql = (
        "-- pgkick.jobs: pgkick's statement\n"
        "SELECT pg_advisory_xact_lock(hashtext('pgkick.migrate')), 'it''s pgkick.x' AS s,\n"
        '  "pgkick".x, t.pgkick, pgkick_worker, pgkick_migrations\n'
        "FROM pgkick.jobs JOIN pgkick.queue_watchers w ON true; /* pgkick.jobs */\n"
        "GRANT USAGE ON SCHEMA pgkick TO pgkick_producer;\n"
        "DO $b$ BEGIN PERFORM 1 FROM pgkick.jobs; END $b$; SELECT $$pgkick.y$$, pgkick.z;"
    )
    assert qualify(sql, "app_queue") == (
        "-- pgkick.jobs: pgkick's statement\n"
        "SELECT pg_advisory_xact_lock(hashtext('pgkick.migrate')), 'it''s pgkick.x' AS s,\n"
        '  "pgkick".x, t.pgkick, pgkick_worker, pgkick_migrations\n'
        'FROM "app_queue".jobs JOIN "app_queue".queue_watchers w ON true; /* pgkick.jobs */\n'
        'GRANT USAGE ON SCHEMA "app_queue" TO pgkick_producer;\n'
        'DO $b$ BEGIN PERFORM 1 FROM pgkick.jobs; END $b$; SELECT $$pgkick.y$$, "app_queue".z;'
    )
    assert qualify(sql, "pgkick") == sql  # the default schema: the text as written


def test_every_statement_names_pgkicks_schema_for_each_table_it_uses() -> None:
    """Catches a statement added to sql/ with an unqualified `jobs` (or any table a
    migration creates): it would work only where a search_path finds the table, never
    through a pooler on a fresh install. Migrations are exempt: they run under SET LOCAL
    search_path. A name followed by a column (`jobs.queue`) is the table's alias."""
    tables = {
        name for _, _, script in migration_scripts.MIGRATIONS for name in CREATED.findall(script)
    }
    assert {"jobs", "queue_watchers"} <= tables
    tables.add("pgkick_migrations")
    offenders = []
    for constant, text in vars(queries).items():
        if not constant.isupper() or constant in ("MIGRATIONS", "MIGRATION_VERSIONS"):
            continue
        code = "\n".join(line.split("--")[0] for line in text.splitlines())
        code = re.sub(r"'(?:[^']|'')*'", "''", code)  # literals name roles, not tables
        code = re.sub(r"\$(\w*)\$.*?\$\1\$", "", code, flags=re.DOTALL)  # DO bodies
        for name in tables:
            if re.search(UNQUALIFIED.format(name=name), code, flags=re.MULTILINE):
                offenders.append(f"{constant}: {name}")
    assert offenders == []


@pytest.mark.parametrize(
    "bad",
    ["App", "1queue", "my-queue", 'q"; DROP TABLE jobs; --', "pg_queue", "x" * 64, "pgkick\n"],
)
def test_a_bad_schema_name_is_refused_naming_the_setting(bad: str) -> None:
    """Catches a name spliced into statements unchecked (an injection, or a quoted
    case-sensitive schema nobody can find in psql)."""
    with pytest.raises(config.ConfigError, match=r"^PGKICK_SCHEMA="):
        config.Settings.from_env({"PGKICK_SCHEMA": bad})
    with pytest.raises(config.ConfigError):
        qualify("SELECT 1 FROM pgkick.jobs", bad)


def test_cli_refuses_a_bad_schema_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches --schema reaching a statement: the command must stop at argument parsing."""
    with pytest.raises(SystemExit) as exit_code:
        cli.main(["migrate", "--dsn", "postgresql://nobody@127.0.0.1:1/none", "--schema", "A-b"])
    assert exit_code.value.code == 2
    assert "--schema='A-b': expected a lowercase identifier" in capsys.readouterr().err


def test_the_default_is_pgkick_and_pgkick_schema_sets_it() -> None:
    assert config.Settings.from_env({}).schema == "pgkick"
    assert config.Settings.from_env({"PGKICK_SCHEMA": "app_queue"}).schema == "app_queue"
