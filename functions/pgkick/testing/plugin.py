"""pgkick's pytest plugin: fixtures for an app's tests, loaded wherever pgkick is installed.

Why a plugin (the `pytest11` entry point) rather than snippets to copy: every app
needs the same three things (a migrated database no other test touches, its
tasks run the way a worker runs them, assertions on what it enqueued) and each
copy got one of them wrong. Why every fixture is named `pgkick_*` and nothing is
autouse: loading the plugin must change nothing for a project that does not ask
for a fixture (pgkick's own suite defines `dsn`, `store`... of its own).

    def test_checkout_sends_a_receipt(pgkick_inline):      # jobs run after each commit
        shop.checkout(order=42)
        pgkick_inline.assert_enqueued(send_receipt, payload={"order": 42})

    def test_checkout_enqueues(pgkick_manual):              # jobs stay queued
        shop.checkout(order=7)
        assert pgkick_manual.enqueued(task="send_receipt") == [{"order": 7}]
        pgkick_manual.drain()

- `pgkick_database_url` (session): a server where databases may be created:
  PGKICK_TEST_DATABASE_URL, DATABASE_URL, or pgkick-dev's embedded PostgreSQL; the
  databases a killed session left there are dropped first (pgkick.testing.leftovers).
- `pgkick_setup_template` (session): override it to create the app's own tables;
  it is called once with the template's DSN, after pgkick's migrations.
- `pgkick_template` (session): that migrated template database's name.
- `pgkick_dsn`: a copy of the template for this test alone, dropped after it.
- `pgkick_inline` / `pgkick_manual`: pgkick.testing's modes on `pgkick_dsn`, with
  DATABASE_URL pointing at it for the test; PGKICK_TASKS' modules are imported
  first, and a task name the registry does not know is refused at enqueue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from pgkick import config
from pgkick.errors import ConfigError, DatabaseUnavailable, RoleRefused
from pgkick.tasks.registry import registry
from pgkick.testing import databases, leftovers
from pgkick.testing.modes import TestQueue, inline, manual


def _in_one_line[T](make: Callable[[], T]) -> T:
    """No server to make the databases on (none set and no pgkick-dev, one out of reach,
    a role that may not CREATE DATABASE) fails each test in one line (pytrace off) saying
    which setting named it: pgkick's traceback through the plugin, the databases and the
    driver buried that line."""
    try:
        return make()
    except (ConfigError, RoleRefused) as exc:  # says what to set already
        refused = str(exc)
    except DatabaseUnavailable as exc:  # the app's own set-up errors keep their traceback
        refused = f"{exc} (pgkick's test databases are made on {databases.source()})"
    pytest.fail(refused, pytrace=False)  # outside the except: no chained tracebacks either


@pytest.fixture(scope="session")
def pgkick_database_url() -> Iterator[str]:
    """A server where the plugin may create databases (see the module's docstring)."""
    with ExitStack() as stack:
        dsn = _in_one_line(lambda: stack.enter_context(databases.server()))
        # the session's mark on its databases, and a killed session's dropped (leftovers)
        _in_one_line(lambda: stack.enter_context(leftovers.session(dsn)))
        yield dsn


@pytest.fixture(scope="session")
def pgkick_setup_template() -> Callable[[str], object]:
    """Called once with the template's DSN after pgkick's migrations: override it in the
    app's conftest.py to create the app's own tables (its migrations, a schema file)."""
    return lambda dsn: None


@pytest.fixture(scope="session")
def pgkick_template(
    pgkick_database_url: str, pgkick_setup_template: Callable[[str], object]
) -> Iterator[str]:
    """A database migrated once per session (pgkick.migrate, then the app's set-up),
    copied for each test; dropped when the session ends."""
    name = _in_one_line(
        lambda: databases.create_template(pgkick_database_url, pgkick_setup_template)
    )
    try:
        yield name
    finally:
        databases.drop(pgkick_database_url, name)


@pytest.fixture
def pgkick_dsn(pgkick_database_url: str, pgkick_template: str) -> Iterator[str]:
    """A database of this test's own, migrated: no job of another test is in it."""
    with databases.copy_of(pgkick_database_url, pgkick_template) as dsn:
        yield dsn


def _tasks_loaded() -> None:
    """The app's PGKICK_TASKS imported, as its worker would. A misspelt one fails the test
    in one line naming the setting (pytrace off): the ConfigError says all there is to fix,
    and its traceback through the plugin, the registry and importlib buried it."""
    try:
        registry.load(config.task_modules())
        return
    except ConfigError as exc:
        refused = str(exc)
    pytest.fail(refused, pytrace=False)  # outside the except: no chained tracebacks either


def _pointed_at(monkeypatch: pytest.MonkeyPatch, dsn: str) -> None:
    """DATABASE_URL names the test's database while the test runs: the modes change only
    pgkick's own settings (`config.overriding`), and an app that opens its connection from
    os.environ["DATABASE_URL"] (for `pgkick.transaction(conn)`) must commit there too."""
    monkeypatch.setenv("DATABASE_URL", dsn)


@pytest.fixture
def pgkick_inline(pgkick_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestQueue]:
    """Each kick drains its queue in this process right after the commit (pgkick.testing's
    inline mode): assert on what ran, and on what was enqueued."""
    _tasks_loaded()
    _pointed_at(monkeypatch, pgkick_dsn)
    with inline(pgkick_dsn) as jobs:
        yield jobs


@pytest.fixture
def pgkick_manual(pgkick_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestQueue]:
    """Jobs stay queued until `drain()` (pgkick.testing's manual mode)."""
    _tasks_loaded()
    _pointed_at(monkeypatch, pgkick_dsn)
    with manual(pgkick_dsn) as jobs:
        yield jobs
