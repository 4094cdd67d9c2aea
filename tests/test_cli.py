"""The operations commands: --json results, and one-line errors that write nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick import cli
from pgkick.store import JobStore
from tests.helpers import job_row, seed


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    out = json.loads(captured.out) if captured.out.strip().startswith("{") else captured.out
    return code, out, captured.err


@pytest.fixture(autouse=True)
def no_kicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr("pgkick.runtime._default", None)


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

    assert run(capsys, "cancel", str(job_id), "--dsn", dsn, "--json")[1] == {"cancelled": [job_id]}
    row = job_row(dsn, job_id)
    assert (row["status"], row["last_error"]) == ("failed", "cancelled by operator")

    code, out, _ = run(
        capsys, "retry", str(job_id), "--dsn", dsn, "--json", "--extra-attempts", "2"
    )
    assert (code, out) == (0, {"retried": [job_id]})
    row = job_row(dsn, job_id)
    assert (row["status"], row["max_attempts"], row["finished_at"]) == ("queued", 2, None)

    with JobStore.open(dsn) as store:
        store.complete_many(store.claim("ops", batch=1, lease=timedelta(minutes=5)))
        store.conn.execute("UPDATE jobs SET finished_at = now() - interval '8 days'")
    assert run(capsys, "purge", "--older-than", "7d", "--dsn", dsn, "--json")[1] == {"purged": 1}
    code, out, _ = run(capsys, "reap", "--dsn", dsn, "--json")
    assert code == 0 and out["requeued"] == 0 and out["purged"] == 0


def count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])  # type: ignore[index]


@pytest.mark.parametrize(
    ("argv", "message", "code"),
    [
        (["enqueue", "noop", "--payload", "{not json"], "--payload is not JSON", 1),
        (["enqueue", "", "--payload", "{}"], "task: must not be empty", 2),
        (["retry", "999999"], "nothing changed: job 999999 does not exist", 1),
        (["cancel"], "name job ids, or --queue/--task, or --all", 1),
        (["enqueue", "noop", "--max-attempts", "0"], "max_attempts: 0 is outside 1..1000", 2),
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


def test_cancel_refuses_a_running_job_and_changes_nothing(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:

    with JobStore.open(dsn) as store:
        first, second = seed(store, 2)
        store.claim("default", batch=1, lease=timedelta(minutes=5))
    code, _, err = run(capsys, "cancel", str(first), str(second), "--dsn", dsn)
    assert code == 1 and f"job {first} is running" in err
    assert job_row(dsn, second)["status"] == "queued"


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
    assert code == 1 and "no database: pass --dsn or set DATABASE_URL" in err


def test_option_errors_exit_2_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["purge", "--older-than", "7d", "--batch", "0"], ["purge", "--older-than", "1w"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*argv, "--dsn", "postgresql://nobody@127.0.0.1:1/none"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "must be at least 1" in err or "expected a number and s, m, h or d" in err


def test_purge_refuses_a_batch_below_one(store: JobStore) -> None:

    with pytest.raises(ValueError, match="batch: 0 must be at least 1"):
        store.purge_finished(timedelta(days=1), batch=0)
