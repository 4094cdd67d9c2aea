"""pgkick's pytest plugin as an app's test suite meets it (issue #27, defect 4): fixtures
shipped with pgkick, a migrated database per test, assertions on what a test enqueued,
and a database without the schema refused with the advice to migrate."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import pgkick
from pgkick import testing
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.registry import Registry
from pgkick.testing import databases, leftovers

SHOP = """
import pgkick

SENT = []


@pgkick.task("plugin_send_receipt")
def send_receipt(payload: dict) -> None:
    SENT.append(payload)


def checkout(order: int) -> None:
    send_receipt.enqueue_and_kick({"order": order}, queue="mail")
"""

APP_TESTS = """
import pytest

import pgkick
import shop


@pytest.fixture
def dsn():  # an app's own fixture of that name: the plugin must not touch it
    return "the app's own"


def test_a_first_test_leaves_a_job_behind(pgkick_manual, dsn):
    assert dsn == "the app's own"
    shop.checkout(1)
    assert pgkick_manual.enqueued(task="plugin_send_receipt") == [{"order": 1}]


def test_the_next_test_sees_none_of_it(pgkick_manual):
    assert pgkick_manual.enqueued() == []
    assert pgkick_manual.drain() == 0
    pgkick_manual.assert_not_enqueued(shop.send_receipt)


def test_inline_runs_and_asserts(pgkick_inline):
    shop.checkout(42)
    assert shop.SENT[-1] == {"order": 42}
    job = pgkick_inline.assert_enqueued(shop.send_receipt, payload={"order": 42}, queue="mail")
    assert job["status"] == "done"
    with pytest.raises(AssertionError, match="no job with task 'plugin_send_receipt', "
                       "payload {'order': 7}; this test enqueued #"):
        pgkick_inline.assert_enqueued("plugin_send_receipt", payload={"order": 7})


def test_a_misspelt_task_is_refused(pgkick_inline):
    with pytest.raises(pgkick.UnknownTask, match="did you mean 'plugin_send_receipt'"):
        pgkick.enqueue_and_kick({}, task="plugin_send_reciept")


def test_the_apps_own_connection_from_database_url_commits_in_the_tests_database(
    pgkick_inline, pgkick_dsn
):
    import os
    import psycopg
    assert os.environ["DATABASE_URL"] == pgkick_dsn
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        with pgkick.transaction(conn) as jobs:
            jobs.enqueue({"order": 9}, task="plugin_send_receipt", queue="mail")
    assert shop.SENT[-1] == {"order": 9}
    pgkick_inline.assert_enqueued(shop.send_receipt, payload={"order": 9})


def test_without_fixtures_nothing_changes():
    import os
    assert "DATABASE_URL" not in os.environ
"""


def test_an_apps_suite_gets_an_isolated_migrated_database_per_test(
    server_dsn: str, tmp_path: Path
) -> None:
    """Catches: no fixtures shipped (the README's snippet used the suite's own dsn/conn),
    a job one test left behind seen by the next one's enqueued()/drain(), fixture names
    clashing with an app's own (`dsn`), a misspelt task enqueued under the plugin, and
    DATABASE_URL left naming another database while the modes run (an app opening its
    own connection from it committed elsewhere), or still set after the test."""
    (tmp_path / "shop.py").write_text(SHOP)
    (tmp_path / "test_shop.py").write_text(APP_TESTS)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PGKICK_TEST_DATABASE_URL": server_dsn,  # the suite's server: no second one started
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "6 passed" in done.stdout


def test_modes_on_an_unmigrated_database_say_to_migrate(empty_dsn: str) -> None:
    """Catches pgkick.testing's modes failing later with a raw UndefinedTable."""
    with pytest.raises(pgkick.SchemaError, match=r"run `pgkick migrate` \(or `pgkick.migrate"):
        with testing.manual(empty_dsn):
            pass


def test_a_block_sees_only_its_own_jobs(dsn: str) -> None:
    """Catches enqueued()/assert_enqueued reading every job of the database: a job from
    before the block (an earlier test's, on a shared database) counted as this one's."""
    tasks = Registry()
    note = tasks.task("plugin_note")(lambda payload: None)
    note.enqueue_and_kick({"n": 0}, dsn=dsn, kicker=NoKicker())  # an earlier test's leftover
    with testing.manual(dsn, tasks=tasks) as jobs:
        assert jobs.enqueued() == []
        jobs.assert_not_enqueued(note)
        note.enqueue_and_kick({"n": 1})
        assert jobs.enqueued(task=note) == [{"n": 1}]
        assert jobs.assert_enqueued("plugin_note", payload={"n": 1})["status"] == "queued"
        with pytest.raises(AssertionError, match=r"expected no job with task 'plugin_note'"):
            jobs.assert_not_enqueued(note, payload={"n": 1})


def test_any_inside_a_payload_matches_any_value_there_and_nothing_more(dsn: str) -> None:
    """Catches (review 61, testkit) `payload={"order": 1, "at": ANY}` failing against the job
    {"order": 1, "at": "..."}: ANY matched only as the whole payload, and compared inside a
    dict with the row's value it matched nothing, so a test could not leave out a timestamp
    or a generated id. ANY stands for one value, wherever it is; the keys stay exact."""
    tasks = Registry()
    note = tasks.task("plugin_any_note")(lambda payload: None)
    with testing.manual(dsn, tasks=tasks) as jobs:
        note.enqueue_and_kick({"order": 1, "at": "2026-12-05T10:00", "lines": [{"sku": "a"}]})
        jobs.assert_enqueued(note, payload={"order": 1, "at": testing.ANY, "lines": testing.ANY})
        jobs.assert_enqueued(
            note, payload={"order": 1, "at": testing.ANY, "lines": [{"sku": testing.ANY}]}
        )
        jobs.assert_not_enqueued(
            note, payload={"order": 2, "at": testing.ANY, "lines": testing.ANY}
        )
        with pytest.raises(AssertionError, match=r"payload \{'order': 1, 'at': ANY\}"):
            jobs.assert_enqueued(note, payload={"order": 1, "at": testing.ANY})  # "lines" missing
        with pytest.raises(AssertionError, match="expected no job"):
            jobs.assert_not_enqueued(
                note, payload={"order": testing.ANY, "at": testing.ANY, "lines": [testing.ANY]}
            )


def test_a_bad_pgkick_tasks_fails_in_one_line_naming_the_setting(
    server_dsn: str, tmp_path: Path
) -> None:
    """Catches (review 61) the testing guide's promise broken: "a module Python cannot find
    fails in one line naming the setting" printed, for each test, pgkick's own traceback
    (some 70 lines through the plugin, the registry and importlib) around that line."""
    (tmp_path / "test_shop.py").write_text("def test_one(pgkick_manual):\n    pass\n")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PGKICK_TEST_DATABASE_URL": server_dsn,
        "PGKICK_TASKS": "shopp.tasks",  # misspelt
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("PGKICK_TASKS names")]
    assert len(said) == 1 and "shopp.tasks" in said[0], done.stdout[-3000:]
    for noise in ("Traceback", "registry.py", "The above exception", "importlib"):
        assert noise not in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(
    ("setting", "extra", "said"),
    [
        (
            {"PGKICK_TEST_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/app"},
            [],
            "cannot connect to PostgreSQL",
        ),
        ({}, ["-p", "no_tooling"], "pgkick's pytest fixtures need a PostgreSQL server"),
    ],
    ids=["unreachable", "no-server"],
)
def test_no_server_for_the_fixtures_fails_in_one_line_naming_the_setting(
    tmp_path: Path, setting: dict[str, str], extra: list[str], said: str
) -> None:
    """Catches (review 61, testkit) a server out of reach, or none set and no pgkick-dev,
    printing for each test pgkick's traceback through the plugin, the databases and the
    driver (30 to 60 lines) around the one line that matters, and the unreachable one not
    saying which setting named that server (the guide: "fails with a line")."""
    (tmp_path / "test_shop.py").write_text("def test_one(pgkick_manual):\n    pass\n")
    (tmp_path / "no_tooling.py").write_text(  # pgkick-dev's entry point not installed
        "import pgkick.testing.databases as d\nd.entry_points = lambda **names: ()\n"
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "test_shop.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, **setting},
        timeout=120,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(said)]
    assert len(lines) == 1 and "PGKICK_TEST_DATABASE_URL" in lines[0], done.stdout[-3000:]
    for noise in ("Traceback", "databases.py", "db.py", "plugin.py"):
        assert noise not in done.stdout, done.stdout[-3000:]


SESSION = """
import sys
from pgkick_dev.scratch import session_server
with session_server() as dsn:
    print(dsn, flush=True)
    sys.stdin.readline()  # the test session runs until told, or killed
"""


def _session_folder(dsn: str) -> Path:
    """The temporary folder of the embedded server answering on `dsn`'s port."""
    port = dsn.rsplit(":", 1)[1].split("/")[0]
    for folder in Path(tempfile.gettempdir()).glob("pgkick-pytest-*"):
        pidfile = folder / "data" / "postmaster.pid"
        if pidfile.exists() and pidfile.read_text().splitlines()[3] == port:
            return folder
    raise AssertionError(f"no pgkick-pytest-* folder serves port {port}")


def _gone(pid: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("end", ["teardown", "SIGTERM", "SIGKILL"])
def test_the_embedded_server_ends_with_the_test_session_however_it_ends(end: str) -> None:
    """Catches (review 61, testkit) a test session killed (SIGTERM: what a CI timeout and
    `timeout` send, and pytest runs no teardown on it; SIGKILL) leaving the plugin's embedded
    PostgreSQL running and its pgkick-pytest-* folder behind, for good, each such session
    one more server (the guide: "stops and removes it at the end")."""
    session = subprocess.Popen(
        [sys.executable, "-c", SESSION], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert session.stdin is not None and session.stdout is not None
    folder = _session_folder(session.stdout.readline().strip())
    postmaster = int((folder / "data" / "postmaster.pid").read_text().splitlines()[0])
    try:
        if end == "teardown":
            session.stdin.write("done\n")
            session.stdin.flush()
        else:
            session.send_signal(getattr(signal, end))
        session.wait(timeout=60)
        assert _gone(postmaster, time.monotonic() + 30), f"postmaster {postmaster} still runs"
        deadline = time.monotonic() + 10
        while folder.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not folder.exists(), folder
    finally:  # never leave a server behind, whatever failed
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, signal.SIGQUIT)


def test_a_role_without_createdb_fails_in_one_line_saying_so(
    server_dsn: str, tmp_path: Path
) -> None:
    """Catches (review 61, testkit) a server whose role may not CREATE DATABASE answered with
    psycopg's InsufficientPrivilege and its traceback through the plugin (some 60 lines a
    test), naming neither CREATEDB, which the guide says the role needs, nor the setting."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"nocreatedb_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'NoCreateDb1'")
    try:
        (tmp_path / "test_shop.py").write_text("def test_one(pgkick_manual):\n    pass\n")
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "PGKICK_TEST_DATABASE_URL": make_conninfo(
                server_dsn, user=name, password="NoCreateDb1"
            ),
        }
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {name}")
    assert done.returncode == 1, done.stdout[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("permission denied")]
    assert len(said) == 1, done.stdout[-3000:]
    assert "CREATEDB" in said[0] and "PGKICK_TEST_DATABASE_URL" in said[0], said[0]
    assert "NoCreateDb1" not in done.stdout
    for noise in ("Traceback", "databases.py", "db.py", "plugin.py"):
        assert noise not in done.stdout, done.stdout[-3000:]


BLOCKED = """
import pathlib
import threading


def test_blocked(pgkick_manual):
    pathlib.Path("started").write_text("x")
    threading.Event().wait()  # until the session is killed
"""


def _databases(server_dsn: str, create: str | None = None) -> set[str]:
    """The pgkick_test_* databases on the server (after creating `create`, if given)."""
    import psycopg

    with psycopg.connect(server_dsn, autocommit=True) as conn:
        if create:
            conn.execute(f'CREATE DATABASE "{create}"')
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname ~ '^pgkick_test_'")
        return {name for (name,) in rows}


def _lock_free(server_dsn: str, number: int, deadline: float) -> bool:
    """Whether a killed session's mark is gone: the server ended its connection."""
    import psycopg

    with psycopg.connect(server_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            sql = "SELECT pg_try_advisory_lock(%s::int4, %s::int4)"
            if conn.execute(sql, (leftovers.SPACE, number)).fetchone() == (True,):
                unlock = "SELECT pg_advisory_unlock(%s::int4, %s::int4)"
                conn.execute(unlock, (leftovers.SPACE, number))
                return True
            time.sleep(0.1)
    return False


def test_a_killed_sessions_databases_are_dropped_by_the_next_session(
    server_dsn: str, tmp_path: Path
) -> None:
    """Catches (review 61, testkit) a test session killed on a named server (SIGKILL, a CI
    timeout) leaving its template and its test's database there for good, one pair more
    per such session: the teardowns that drop them never ran. The next session drops
    them, and neither a live session's databases nor a pgkick_test_* it did not name."""
    (tmp_path / "test_blocked.py").write_text(BLOCKED)
    (tmp_path / "test_quick.py").write_text("def test_quick(pgkick_manual):\n    pass\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    env["PGKICK_TEST_DATABASE_URL"] = server_dsn
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    unmarked = f"pgkick_test_db_{uuid.uuid4().hex[:12]}"  # an older pgkick's, or by hand
    before = _databases(server_dsn, create=unmarked)
    ours = {unmarked}
    try:
        killed = subprocess.Popen([*pytest_cmd, "test_blocked.py"], cwd=tmp_path, env=env)
        try:
            deadline = time.monotonic() + 120
            while not (tmp_path / "started").exists() and killed.poll() is None:
                assert time.monotonic() < deadline, "the session never reached its test"
                time.sleep(0.1)
        finally:
            killed.kill()
            killed.wait()
        left = _databases(server_dsn) - before
        ours |= left
        assert len(left) == 2, left  # its template and its test's copy
        for mark in {m[1] for m in map(leftovers.MARKED.fullmatch, left) if m}:
            assert _lock_free(server_dsn, int(mark, 16), time.monotonic() + 30)
        with leftovers.session(server_dsn):  # a live session while the next one starts
            live = databases.create_template(server_dsn, lambda dsn: None)
            ours.add(live)
            done = subprocess.run(
                [*pytest_cmd, "test_quick.py"],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout[-3000:]
            after = _databases(server_dsn)
        assert not left & after, left & after
        assert {live, unmarked} <= after
    finally:
        for name in ours:
            databases.drop(server_dsn, name)
