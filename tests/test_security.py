"""Least-privilege roles, no secret in any log line, and no SQL built from input."""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import pgkick
from pgkick import aio, cli
from pgkick.config import Settings
from pgkick.errors import DatabaseUnavailable, JobNotFinished, RoleRefused
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.store import migrations as schema
from pgkick.worker.reaper import reap
from pgkick.worker.runtime import Runtime
from tests.helpers import job_row
from tests.store import JobStore

ROOT = Path(__file__).parent.parent


@pytest.fixture
def login_as(dsn: str) -> Iterator[dict[str, str]]:
    """A login role per pgkick role (with a distinctive password); DSNs by part."""
    with JobStore.open(dsn) as admin:
        assert schema.create_roles(admin) == [
            "pgkick_producer",
            "pgkick_worker",
            "pgkick_maintainer",
        ]
    suffix, made = uuid.uuid4().hex[:8], {}
    with psycopg.connect(dsn, autocommit=True) as admin:
        for part in ("producer", "worker", "maintainer"):
            name, password = f"app_{part}_{suffix}", f"pw-{uuid.uuid4().hex}"
            admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE pgkick_{part}")
            made[part] = make_conninfo(dsn, user=name, password=password)
    yield made
    with psycopg.connect(dsn, autocommit=True) as admin:
        for part in made:
            admin.execute(f"DROP ROLE app_{part}_{suffix}")


def test_each_role_can_do_its_part_and_no_more(dsn: str, login_as: dict[str, str]) -> None:
    seed_id = producer.enqueue_and_kick(
        {"secret": "other app's data"}, task="noop", dsn=dsn, kicker=NoKicker()
    )
    job_id = producer.enqueue_and_kick(
        {"n": 1}, task="noop", dsn=login_as["producer"], kicker=NoKicker()
    )
    assert job_id > seed_id
    with psycopg.connect(login_as["producer"], autocommit=True) as app:
        for forbidden in (
            "SELECT payload FROM pgkick.jobs",
            "SELECT status FROM pgkick.jobs",
            "UPDATE pgkick.jobs SET status = 'done'",
            "DELETE FROM pgkick.jobs",
            "SELECT * FROM pgkick.job_claim('default', 10, '5 minutes', NULL)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(forbidden)

    settings = Settings.from_env({"PGKICK_KICKER": "none"})
    summary = Runtime(settings, NoKicker(), dsn=lambda: login_as["worker"]).drain(
        "default", lambda: 60_000
    )
    assert summary.done == 2
    with psycopg.connect(login_as["worker"], autocommit=True) as worker:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.execute("DELETE FROM pgkick.jobs")
        # (max_attempts is the worker's since migration 0035: its rescue reaps, and gives a
        # suspect that never started its attempt back as max_attempts + 1; like attempts,
        # which it always had. What a job is stays out of its reach.)
        for forbidden in ("payload = '{}'", "task = 'other'", "queue = 'other'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                worker.execute(f"UPDATE pgkick.jobs SET {forbidden}")

    with JobStore.open(login_as["maintainer"]) as maintainer:
        report = reap(maintainer, NoKicker(), retention=timedelta(0))
        assert report["purged"] == 2
    # an operator cancels (it failed with "permission denied": the cancel clears waiting_on)
    queued = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    assert cli.main(["cancel", str(queued), "--dsn", login_as["maintainer"]]) == 0
    assert job_row(dsn, queued)["status"] == "failed"


def test_the_producer_role_debounces_and_throttles_yet_reads_and_updates_nothing(
    dsn: str, login_as: dict[str, str]
) -> None:
    """Catches job_insert_flow (migration 0015) refused to pgkick_producer (EXECUTE not
    granted, or the function run with the caller's rights, which may not read status)."""
    app = login_as["producer"]
    first = producer.enqueue_and_kick(
        {"n": 1}, task="t", unique_key="d", debounce=5, dsn=app, kicker=NoKicker()
    )
    again = producer.enqueue_and_kick(
        {"n": 2}, task="t", unique_key="d", debounce=5, dsn=app, kicker=NoKicker()
    )
    kept = producer.enqueue_and_kick(
        {"n": 1}, task="t", unique_key="t", throttle=5, dsn=app, kicker=NoKicker()
    )
    assert again == first and kept != first
    with psycopg.connect(dsn) as admin:
        row = admin.execute("SELECT payload FROM pgkick.jobs WHERE id = %s", (first,)).fetchone()
        assert row == ({"n": 2},)


def test_the_producer_role_enqueues_unique_jobs_alone_in_a_batch_and_from_asyncio(
    dsn: str, login_as: dict[str, str]
) -> None:
    """Catches a unique enqueue refused to pgkick_producer ("permission denied for table
    jobs"): an ON CONFLICT naming the live-key index reads its predicate's column, status,
    which the role may not read. A key taken again answers its holder, alone, in a batch,
    and from asyncio; the role still reads no status."""
    app = login_as["producer"]
    first = producer.enqueue_and_kick({}, task="t", unique_key="u1", dsn=app, kicker=NoKicker())
    again = producer.enqueue_and_kick({}, task="t", unique_key="u1", dsn=app, kicker=NoKicker())
    batch = producer.enqueue_many(
        [
            {"payload": {}, "task": "t", "unique_key": "u1"},
            {"payload": {}, "task": "t", "unique_key": "u2"},
            {"payload": {}, "task": "t", "unique_key": "u2"},
        ],
        dsn=app,
        kicker=NoKicker(),
    )
    from_aio = asyncio.run(
        aio.enqueue_and_kick({}, task="t", unique_key="u2", dsn=app, kicker=NoKicker())
    )
    assert again == first and batch[0] == first
    assert batch[1] == batch[2] == from_aio != first
    with psycopg.connect(dsn) as admin:
        (count,) = admin.execute("SELECT count(*) FROM pgkick.jobs").fetchone() or (0,)
        unique = admin.execute(
            "SELECT indexrelid::regclass::text FROM pg_index"
            " WHERE indrelid = 'pgkick.jobs'::regclass AND (indisunique OR indisexclusion)"
            " ORDER BY 1"
        ).fetchall()
    assert count == 2
    # The inserts name no conflict target (sql/job_insert_unique.sql): a new unique index
    # on jobs would make them skip its conflicts as a held key.
    assert unique == [("pgkick.jobs_pkey",), ("pgkick.jobs_unique_live_idx",)]
    with psycopg.connect(app, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT status FROM pgkick.jobs")


def test_a_task_run_as_pgkick_worker_enqueues_debounced_and_throttled_follow_ups(
    dsn: str, login_as: dict[str, str]
) -> None:
    """Catches job_insert_flow (migration 0015) executable by pgkick_producer alone: a task
    whose worker connects as pgkick_worker enqueues its follow-ups on that connection, and
    a debounced or throttled one was refused ("permission denied for function")."""
    worker = login_as["worker"]
    first = producer.enqueue_and_kick(
        {"n": 1}, task="t", unique_key="wd", debounce=5, dsn=worker, kicker=NoKicker()
    )
    again = producer.enqueue_and_kick(
        {"n": 2}, task="t", unique_key="wd", debounce=5, dsn=worker, kicker=NoKicker()
    )
    kept = producer.enqueue_and_kick(
        {}, task="t", unique_key="wt", throttle=5, dsn=worker, kicker=NoKicker()
    )
    assert again == first != kept
    assert job_row(dsn, first)["payload"] == {"n": 2}


def test_a_producer_reading_a_result_is_told_which_role_may(
    dsn: str, login_as: dict[str, str]
) -> None:
    """Catches psycopg's bare "permission denied for table jobs" from pgkick.result and
    pgkick.wait on a pgkick_producer connection (the role reads no outcome, by design):
    the error names the roles that may, as a pgkick error."""
    job_id = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    for read in (
        lambda: pgkick.result(job_id, dsn=login_as["producer"]),
        lambda: pgkick.wait(job_id, timeout=1, dsn=login_as["producer"]),
    ):
        with pytest.raises(RoleRefused, match=r"pgkick_worker or pgkick_maintainer") as raised:
            read()
        assert isinstance(raised.value, PermissionError)
        assert "permission denied for table jobs" in str(raised.value)
    with pytest.raises(JobNotFinished):  # a role that may read: the job is only queued
        pgkick.result(job_id, dsn=login_as["worker"])


def test_the_producer_links_only_the_jobs_its_own_transaction_enqueued(
    dsn: str, login_as: dict[str, str]
) -> None:
    """Catches job_await (SECURITY DEFINER, executable by pgkick_producer) taking any job as
    a child: called with another app's queued job and a failed parent, it failed that job
    (and with a running parent, held it 'waiting'), though the producer updates nothing.
    A child enqueued in the caller's transaction, in a savepoint too, still links."""
    app = login_as["producer"]
    other = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    with JobStore.open(dsn) as admin:
        failed = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
        admin.execute(
            "UPDATE pgkick.jobs SET status = 'failed', finished_at = now(), last_error = 'x'"
            " WHERE id = %(id)s",
            id=failed,
        )
    with psycopg.connect(app) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not enqueued in this"):
            conn.execute(
                "SELECT * FROM pgkick.job_await(%s, %s, %s, NULL)", ([other], [failed], ["fail"])
            )
    assert job_row(dsn, other)["status"] == "queued"
    with psycopg.connect(app) as conn, pgkick.transaction(conn, kicker=NoKicker()) as jobs:
        with conn.transaction():  # a savepoint: the child's xmin is a subtransaction's
            child = jobs.enqueue({}, task="noop", after=[failed])
    assert job_row(dsn, child)["status"] == "failed"  # linked, and ended by its failed parent


def test_no_password_in_any_log_line_error_or_summary(
    dsn: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full run with a distinctive password in the DSN: it must appear nowhere."""
    password = f"pw-{uuid.uuid4().hex}"
    user = f"app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {user} SUPERUSER LOGIN PASSWORD '{password}'")
    secret_dsn = make_conninfo(dsn, user=user, password=password)
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)
    texts: list[str] = []
    try:
        seed_ids = producer.enqueue_many(
            [{"payload": {}, "task": "flaky"}] * 3, dsn=secret_dsn, kicker=NoKicker()
        )
        settings = Settings.from_env({"PGKICK_KICKER": "none"})
        summary = Runtime(settings, NoKicker(), dsn=lambda: secret_dsn).drain(
            "default", lambda: 60_000
        )
        texts.append(json.dumps(summary.as_dict()))
        with JobStore.open(secret_dsn) as store:
            texts.append(
                json.dumps(reap(store, NoKicker(), retention=timedelta(days=1)), default=str)
            )
        wrong = make_conninfo(secret_dsn, password=password + "-wrong")
        with pytest.raises(DatabaseUnavailable) as failure:
            JobStore.open(wrong).__enter__()
        texts.append(str(failure.value))
        for argv in (["status", "--dsn", secret_dsn], ["status", "--dsn", wrong]):
            cli.main(argv)
        captured = capsys.readouterr()
        texts += [captured.out, captured.err]
        texts += [json.dumps(r.__dict__, default=str) for r in caplog.records]
        assert len(seed_ids) == 3 and summary.retried == 3
        assert "password authentication failed" in str(failure.value)
        assert all(password not in text for text in texts)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {user}")
    assert conninfo_to_dict(secret_dsn)["password"] == password  # the DSN did carry it


EXECUTORS = {"execute", "rows", "dicts", "one", "count"}


def _named(node: ast.expr) -> bool:
    """`queries.NAME`: a statement of the bundle."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "queries"
    )


def test_runtime_sql_comes_only_from_the_bundled_statements() -> None:
    """Every execute/rows/dicts/one/count call in functions/ passes queries.NAME (or, inside
    db.py and the migrator, the statement it was handed, or the query of a bound
    `Statement`), and every `Statement` is bound to queries.NAME: no SQL is ever built
    from input."""
    offenders = []
    for path in sorted((ROOT / "functions").rglob("*.py")):
        if path.name == "queries.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Statement"
                and not (node.args and _named(node.args[0]))
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in EXECUTORS
                and node.args
            ):
                continue
            first = node.args[0]
            passed_through = isinstance(first, ast.Name) and first.id in {"query", "script"}
            # pgkick.testing.databases: a bundled statement whose placeholder database names
            # are replaced by generated, checked, quoted ones (a name cannot be a parameter)
            renamed = (
                isinstance(first, ast.Call)
                and ast.unparse(first.func) == "_named"
                and ast.unparse(first.args[0]).startswith("queries.")
            )
            bound = (  # a Statement's query: bound to queries.NAME, checked above
                isinstance(first, ast.Attribute)
                and first.attr == "query"
                and isinstance(first.value, ast.Name)
                and first.value.id == "statement"
            )
            # pgkick.store.listen: LISTEN and UNLISTEN take a channel as an identifier, not a
            # parameter: a bundled statement with the channel quoted in (checked below)
            channel = path.name == "listen.py" and ast.unparse(first) == "statement.encode()"
            if not (_named(first) or passed_through or bound or renamed or channel):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(first)}")
    assert offenders == []
    # and every channel statement is a bundled one with the channel quoted in
    listen = (ROOT / "functions" / "pgkick" / "store" / "listen.py").read_text()
    sent = [
        ast.unparse(node.args[0])
        for node in ast.walk(ast.parse(listen))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "self._channel_statement"
    ]
    assert sent and all(
        text.startswith("queries.") and text.endswith(".format(channel=quote(channel))")
        for text in sent
    ), sent


def test_only_db_py_imports_psycopg() -> None:
    """One module talks to the driver (with its asyncio forms and its type adapters beside
    it); everything else runs named statements through it."""
    importers = []
    for path in sorted((ROOT / "functions").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "psycopg" for name in names):
                importers.append(path.relative_to(ROOT).as_posix())
    assert sorted(set(importers)) == [
        "functions/pgkick/connections/adapters.py",  # its type adapters, registered by db.py
        "functions/pgkick/connections/aio_db.py",  # db.py's rules on an AsyncConnection
        "functions/pgkick/connections/db.py",
    ]


def test_cli_enqueue_as_pgkick_producer_exits_0_after_its_commit(
    dsn: str,
    login_as: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches `pgkick enqueue` reading the job back with columns pgkick_producer may not
    read: it committed the job, then exited 2 on `permission denied`, inviting a retry
    that enqueues it twice. It must answer from what the insert returned."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)
    code = cli.main(["enqueue", "noop", "--queue", "mail", "--dsn", login_as["producer"], "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert result["queue"] == "mail" and "run_at" in result and "status" not in result
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT id, status FROM pgkick.jobs").fetchall() == [
            (result["id"], "queued")
        ]
