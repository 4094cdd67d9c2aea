"""Fixtures: one real PostgreSQL for the session, a fresh migrated database per test.

`DATABASE_URL` (a role allowed to CREATE DATABASE) is used when set; otherwise
the embedded PostgreSQL 17 is started in a temporary folder. Each test gets its
own database cloned from a migrated template, so tests never see each other's
rows and any test may open as many connections or processes as it needs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from moto import mock_aws
from psycopg.conninfo import make_conninfo

import pgkick_dev.tasks  # noqa: F401  sleep, flaky, fail, crash: here, and below in workers
from pgkick.store import migrations as schema
from pgkick_dev.embedded import EmbeddedPostgres
from tests.helpers import FakeClock
from tests.spies import CheckedRegistry
from tests.store import JobStore

# The tests' tasks are not production's (pgkick.tasks.registry knows noop only): this process
# registers them by the import above, the worker processes it starts by PGKICK_TASKS.
os.environ.setdefault("PGKICK_TASKS", "pgkick_dev.tasks")
# The suite's tests count kicks and wake-ups exactly, and wait for the stack's schedules to
# fire: the safety wake-up after each kick (pgkick.kick.safety, a minute later) would add one
# to each. It is tested on its own, switched on (tests/test_safety.py).
os.environ.setdefault("PGKICK_KICK_SAFETY_MS", "0")

# One template a test process (a pytest-xdist worker: the suite runs on two, pyproject's
# addopts): each worker starts its own embedded server, but processes sharing a
# DATABASE_URL server (two sessions at once, from two checkouts) must not drop each
# other's template, hence the process id; dropped at the session's end.
TEMPLATE = f"pgkick_test_template{os.environ.get('PYTEST_XDIST_WORKER', '')}_{os.getpid()}"
# Test-only durability shortcuts: nothing here must survive a power cut.
FAST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_preload_libraries": "'pg_stat_statements'",
}


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres | None]:
    """The embedded server, or None when DATABASE_URL points at one."""
    if os.environ.get("DATABASE_URL"):
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="pgkick-test-"))
    root.chmod(0o755)  # reachable by the unprivileged user the server runs as
    server = EmbeddedPostgres(root / "data", settings=FAST_SETTINGS)
    server.start()
    try:
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def server_dsn(embedded_pg: EmbeddedPostgres | None) -> str:
    return os.environ.get("DATABASE_URL") or (embedded_pg.dsn if embedded_pg else "")


@pytest.fixture(scope="session")
def template_db(server_dsn: str) -> Iterator[str]:
    """A database migrated once, cloned for every test."""
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {TEMPLATE}")
    with JobStore.open(make_conninfo(server_dsn, dbname=TEMPLATE)) as store:
        schema.migrate(store)
    yield TEMPLATE
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")


def _fresh_database(server_dsn: str, template: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    try:
        yield make_conninfo(server_dsn, dbname=name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def dsn(server_dsn: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test alone."""
    yield from _fresh_database(server_dsn, template_db)


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database with no pgkick schema at all."""
    yield from _fresh_database(server_dsn, "template0")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(dsn: str) -> Iterator[JobStore]:
    with JobStore.open(dsn) as opened:
        yield opened


def _fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto for every AWS call, with Lambda's Docker-less backend (it runs no code)."""
    _fake_credentials(monkeypatch)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        yield


@pytest.fixture
def aws_full_lambda(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto's full Lambda backend: it checks that a function exists (the simple one does not)."""
    _fake_credentials(monkeypatch)
    with mock_aws():
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a test marked slow first, the rest in their order: pytest-xdist hands
    out whole files in collection order (pyproject's addopts), so the longest (the bench's,
    about 6 minutes) starts while the other process works through the many short files,
    and the two end together. Handed out by test count instead, the bench's file of five
    tests came last and ran alone at the end (the suite took 50 s longer)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # a stable sort: order kept within


CHAOS_RESULTS: list[dict[str, Any]] = []  # the chaos scenarios' figures, as reports bring them


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A chaos scenario's figures ride on its test's report: under pytest-xdist the test ran
    in a worker process, and only reports reach the process that prints the summary."""
    report = yield
    chaos = sys.modules.get("tests.chaos")  # loaded only by the files that play scenarios
    if call.when == "call" and chaos is not None:
        report.user_properties.extend(("chaos", result) for result in chaos.RESULTS)
        chaos.RESULTS.clear()
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    CHAOS_RESULTS.extend(value for name, value in report.user_properties if name == "chaos")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The chaos scenarios' measured recovery times, when any ran."""
    if CHAOS_RESULTS:
        terminalreporter.write_sep("-", "chaos scenarios: measured recovery")
        for result in CHAOS_RESULTS:
            facts = ", ".join(f"{k}={v}" for k, v in result.items() if k != "scenario")
            terminalreporter.write_line(f"{result['scenario']:<22} {facts}")


@pytest.fixture
def checked_tasks() -> Iterator[CheckedRegistry]:
    """A task registry whose tasks' failed assertions fail the test (the worker swallows them)."""
    tasks = CheckedRegistry()
    yield tasks
    tasks.reraise()


@pytest.fixture(autouse=True)
def own_dev_stack_address(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's PGKICK_KICKER=local finds (or starts) a `pgkick dev` of its own, on a
    port of its own, stopped when the test ends: a detached stack left by an earlier test
    (serving that test's database) would take this test's kicks for itself, as one left
    on the default port by another project would on a laptop (the client refuses it)."""
    import json
    import signal
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("PGKICK_DEV_URL", url)
    yield
    try:
        with urllib.request.urlopen(f"{url}/_pgkick/status", timeout=0.5) as answer:
            pid = json.loads(answer.read()).get("pid")
    except OSError:
        return  # none was started
    if isinstance(pid, int) and pid != os.getpid():
        os.kill(pid, signal.SIGTERM)
