"""The operations commands: --json results, and one-line errors that write nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgkick import cli
from tests.helpers import job_row, seed
from tests.store import JobStore


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    out = json.loads(captured.out) if captured.out.strip().startswith("{") else captured.out
    return code, out, captured.err


@pytest.fixture(autouse=True)
def no_kicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr("pgkick.kick.default._default", None)


def test_enqueue_status_cancel_retry_purge_reap(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "enqueue", "noop", "--payload", '{"a": 1}', "--queue", "ops", "--dsn", dsn, "--json"
    )
    assert code == 0 and out["status"] == "queued" and out["queue"] == "ops"
    job_id = out["id"]
    assert job_row(dsn, job_id)["payload"] == {"a": 1}

    code, out, _ = run(capsys, "status", "--dsn", dsn, "--json")
    (ops,) = [q for q in out["queues"] if q["queue"] == "ops"]
    assert (ops["queued"], ops["ready"], ops["running"]) == (1, 1, 0)
    assert "n_dead_tup" in out["table"] and "last_autovacuum" in out["table"]

    assert run(capsys, "cancel", str(job_id), "--dsn", dsn, "--json")[1] == {
        "cancelled": [job_id],
        "cancelling": [],
    }
    row = job_row(dsn, job_id)
    assert (row["status"], row["last_error"]) == ("failed", "cancelled by operator")

    code, out, _ = run(
        capsys, "retry", str(job_id), "--dsn", dsn, "--json", "--extra-attempts", "2"
    )
    assert (code, out) == (0, {"retried": [job_id], "revived_dependants": 0})
    row = job_row(dsn, job_id)
    assert (row["status"], row["max_attempts"], row["finished_at"]) == ("queued", 2, None)

    with JobStore.open(dsn) as store:
        store.complete_many(store.claim("ops", batch=1, lease=timedelta(minutes=5)))
        store.conn.execute("UPDATE pgkick.jobs SET finished_at = now() - interval '8 days'")
    assert run(capsys, "purge", "--older-than", "7d", "--dsn", dsn, "--json")[1] == {"purged": 1}
    code, out, _ = run(capsys, "reap", "--dsn", dsn, "--json")
    assert code == 0 and out["requeued"] == 0 and out["purged"] == 0


def count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone()[0])  # type: ignore[index]


@pytest.mark.parametrize(
    ("argv", "message", "code"),
    [
        (["enqueue", "noop", "--payload", "{not json"], "--payload is not JSON", 2),
        (["enqueue", "", "--payload", "{}"], "task: must not be empty", 2),
        (["retry", "999999"], "nothing changed: job 999999 does not exist", 1),
        (["cancel"], "name job ids, or --queue/--task, or --all", 1),
        (["enqueue", "noop", "--max-attempts", "0"], "max_attempts: 0 is outside 1..1000", 2),
        # Each of these was a traceback (RecursionError, OverflowError) or a commit first:
        (["enqueue", "noop", "--payload", "[" * 100_000], "--payload is not JSON", 2),
        # JSON, but past a float: it was refused as "NaN and Infinity are not JSON" (F5)
        (["enqueue", "noop", "--payload", '{"big": 1e400}'], "number 1e400 is out of range", 2),
        (["enqueue", "noop", "--payload", "[-1E+309]"], "number -1E+309 is out of range", 2),
        (["enqueue", "noop", "--delay", "inf"], "delay: inf is not a number of seconds", 2),
        (["enqueue", "noop", "--delay", "nan"], "delay: nan is not a number of seconds", 2),
        (["enqueue", "noop", "--delay", "3e11"], "would be due after 9999-12-30", 2),
        (["enqueue", "noop", "--delay", "-1"], "delay: -1 seconds is negative", 2),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, code: int
) -> None:
    with JobStore.open(dsn) as store:
        seed(store, 2)
    got, _, err = run(capsys, *argv, "--dsn", dsn)
    assert got == code
    assert err.startswith(f"pgkick {argv[0]}: ") and err.count("\n") == 1 and message in err
    assert count(dsn) == 2


def test_cancel_marks_a_running_job_refuses_a_finished_one_and_changes_nothing(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches: a cancel that changes some jobs before refusing another (a finished one),
    and a cancel that fails a running job outright (its worker still runs it: the job
    must stay running, marked, until the worker's heartbeat tells the task)."""
    with JobStore.open(dsn) as store:
        first, second, third = seed(store, 3)
        store.claim("default", batch=1, lease=timedelta(minutes=5))  # the first: running
        (done,) = store.claim("default", batch=1, lease=timedelta(minutes=5))
        store.complete_many([done])
    code, _, err = run(capsys, "cancel", str(first), str(third), str(second), "--dsn", dsn)
    assert code == 1 and f"job {second} is done" in err
    assert job_row(dsn, third)["status"] == "queued"
    assert job_row(dsn, first)["cancel_requested_at"] is None

    code, out, _ = run(capsys, "cancel", str(first), str(third), "--dsn", dsn, "--json")
    assert (code, out) == (0, {"cancelled": [third], "cancelling": [first]})
    row = job_row(dsn, first)
    assert row["status"] == "running" and row["cancel_requested_at"] is not None


@pytest.mark.parametrize("command", ["status", "enqueue", "reap"])
def test_missing_schema_and_wrong_server_are_named(
    empty_dsn: str, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    extra = ["noop"] if command == "enqueue" else []
    code, _, err = run(capsys, command, *extra, "--dsn", empty_dsn)
    assert code == 2 and "schema is missing" in err and "pgkick migrate" in err
    code, _, err = run(capsys, command, *extra, "--dsn", "postgresql://x:y@127.0.0.1:1/none")
    assert code == 2 and "cannot connect to PostgreSQL" in err and err.count("\n") == 1
    code, _, err = run(capsys, command, *extra)
    assert (
        code == 1
        and "no database: pass --dsn, or set DATABASE_URL or PGKICK_DATABASE_SECRET_ARN" in err
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["purge", "--older-than", "7d", "--batch", "0"], "must be at least 1"),
        (["purge", "--older-than", "1w"], "expected a number and s, m, h or d"),
        (["purge", "--older-than", "99999999999d"], "at most 36500d"),  # was OverflowError
        (["purge", "--older-than", "36501d"], "at most 36500d"),
        (["enqueue", "noop", "--wait", "inf"], "expected 0..3600 seconds"),  # raised post-commit
        (["enqueue", "noop", "--wait", "nan"], "expected 0..3600 seconds"),
        (["retry", "--all", "--extra-attempts", "5000"], "at most 999"),  # max_attempts > 1000
    ],
)
def test_option_errors_exit_2_before_connecting(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Catches options that crashed with a traceback (purge --older-than 99999999999d) or
    were accepted and failed after the commit (--wait inf), or pushed a retried job's
    max_attempts past 1000: each is refused by the parser, before any connection."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--dsn", "postgresql://nobody@127.0.0.1:1/none"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_retry_never_takes_max_attempts_past_1000(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `retry --extra-attempts N` writing max_attempts = attempts + N past the
    limit the producer enforces (1000): it is capped, and a job that used all 1000 attempts
    is refused by name, with nothing changed."""
    with JobStore.open(dsn) as store:
        near, spent = seed(store, 2)
        store.conn.execute(
            "UPDATE pgkick.jobs SET status = 'failed', finished_at = now(), max_attempts = 1000,"
            " attempts = CASE WHEN id = %s THEN 998 ELSE 1000 END",
            [near],
        )
    code, _, err = run(
        capsys, "retry", str(near), str(spent), "--extra-attempts", "5", "--dsn", dsn
    )
    assert code == 1 and f"job {spent} has used all 1000 attempts" in err
    assert job_row(dsn, near)["status"] == "failed"
    code, out, _ = run(capsys, "retry", "--all", "--extra-attempts", "999", "--dsn", dsn, "--json")
    assert (code, out) == (0, {"retried": [near], "revived_dependants": 0})
    assert (job_row(dsn, near)["max_attempts"], job_row(dsn, spent)["status"]) == (1000, "failed")


def test_enqueue_json_prints_one_document_while_local_workers_run(dsn: str) -> None:
    """Catches the local workers' lines (Powertools' metrics) landing on the command's
    stdout next to its --json result: stdout must be exactly one JSON document."""
    env = {**os.environ, "PGKICK_KICKER": "local", "PGKICK_TASKS": "", "DATABASE_URL": dsn}
    done = subprocess.run(
        [sys.executable, "-m", "pgkick.cli.main", "enqueue", "noop", "--dsn", dsn, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # one document, nothing else
    assert result["status"] == "done" and done.stdout.count("\n") == 1, done.stderr


def test_purge_refuses_a_batch_below_one(store: JobStore) -> None:

    with pytest.raises(ValueError, match="batch: 0 must be at least 1"):
        store.purge_finished(timedelta(days=1), batch=0)


def test_enqueue_waits_by_default_only_for_a_kicker_that_runs_jobs_nearby() -> None:
    """`pgkick enqueue` waits for its job by default with the dev stack's kickers (which say
    `runs_jobs_nearby`), never with Lambda's or none: catches the attribute dropped from the
    local kickers (the command would answer before its job ran) or a production kicker made
    to wait (a command blocked for a minute on a worker far away), and a job due later (a
    delay, a debounce: a shell's burst of `--debounce` enqueues took a minute a call)."""
    from pgkick.cli.main import LOCAL_WAIT, _local_wait
    from pgkick.kick.kickers import NoKicker
    from pgkick.kick.lambda_kicker import LambdaKicker
    from pgkick_dev.local.client import DevClient
    from pgkick_dev.local.kicker import LocalKicker

    now = datetime.now(UTC)
    local = DevClient("http://127.0.0.1:1", "worker")
    assert _local_wait(local, now) == LOCAL_WAIT > 0
    assert _local_wait(local, now + timedelta(seconds=20)) == 0.0  # debounced, or delayed
    assert LocalKicker.runs_jobs_nearby is True
    assert _local_wait(LambdaKicker("worker"), now) == 0.0
    assert _local_wait(NoKicker(), now) == 0.0


def test_a_retry_with_no_kicker_configured_is_refused_before_it_writes(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `pgkick retry` building its kicker after its commit: with no kicker
    configured it put the job back in the queue, then exited 2 saying so (an error after a
    commit: run again, it found nothing to retry). Now refused first, the job still failed."""
    for name in ("PGKICK_KICKER", "PGKICK_WORKER_FUNCTION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pgkick.kick.default._default", None)
    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1)
        store.conn.execute(
            "UPDATE pgkick.jobs SET status = 'failed', attempts = 5, finished_at = now()"
            " WHERE id = %s",
            (job_id,),
        )
    code, out, err = run(capsys, "retry", str(job_id), "--dsn", dsn)
    assert code == 2 and out == "" and "PGKICK_WORKER_FUNCTION" in err
    assert job_row(dsn, job_id)["status"] == "failed"


def test_ctrl_c_during_migrate_is_one_line_exit_130_and_applies_nothing(
    empty_dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a Ctrl-C that printed a KeyboardInterrupt traceback (and no JSON document with
    --json) in the middle of `pgkick migrate`: one line, exit 130 as a shell gives for
    SIGINT, and the migration's one transaction rolled back (a review of the CLI, F3)."""
    from pgkick.store.migrations import MigrationStore

    applied = MigrationStore.apply_migration

    def interrupted_at_the_fifth(self: MigrationStore, version: int, *rest: Any) -> None:
        if version == 5:
            raise KeyboardInterrupt
        applied(self, version, *rest)

    monkeypatch.setattr(MigrationStore, "apply_migration", interrupted_at_the_fifth)
    code, out, err = run(capsys, "migrate", "--dsn", empty_dsn, "--json")
    assert code == 130 and err.count("\n") == 1 and "interrupted (Ctrl-C)" in err
    assert out == {"error": err.removeprefix("pgkick migrate: ").strip()}
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('pgkick')").fetchone() == (None,)


@pytest.mark.parametrize(
    ("argv", "role"),
    [
        (["status"], "pgkick_maintainer"),
        (["retry", "--all"], "pgkick_maintainer"),
        (["limit", "q", "3"], "pgkick_maintainer"),
        (["enqueue", "noop"], "pgkick_producer"),
        (["migrate"], "owner"),
    ],
)
def test_a_role_without_grants_is_told_which_role_to_use(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], role: str
) -> None:
    """Catches the server's bare 'permission denied for schema pgkick' as the whole answer to
    a login role without pgkick's grants: the line names the role to connect as (as `pgkick
    reap` did alone), exit 2, nothing written (a review of the CLI, F4)."""
    import uuid

    from psycopg.conninfo import make_conninfo

    name = f"nogrants_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'NoGrantsPass1'")
    try:
        user = make_conninfo(dsn, user=name, password="NoGrantsPass1")
        code, _, err = run(capsys, *argv, "--dsn", user)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {name}")
            admin.execute(f"DROP ROLE {name}")
    assert code == 2 and err.count("\n") == 1 and "permission denied" in err
    assert role in err and "NoGrantsPass1" not in err
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


def test_a_schema_missing_under_schema_names_it_in_the_advice(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches 'run `pgkick migrate`' as the advice for `--schema elsewhere` on a database
    migrated in `pgkick` alone: run as said, it migrated `pgkick` again and the command
    kept failing (a review of the CLI, F6)."""
    code, _, err = run(capsys, "status", "--schema", "elsewhere", "--dsn", dsn)
    assert code == 2 and "run `pgkick migrate --schema elsewhere`" in err
