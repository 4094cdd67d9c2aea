"""`--dry-run` of `pgkick retry|cancel|purge` (a walkthrough's rough edges): it counts with
every form the real action takes (job ids, `purge --older-than`, filters) and refuses what
the real action refuses, before anything is written."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick import cli
from pgkick.validation import JobSpec
from tests.store import JobStore
from tests.test_bulk import no_kicks, run  # noqa: F401 (no_kicks: an autouse fixture)

LEASE = timedelta(minutes=5)


def insert(store: JobStore, count: int, *, unique_key: str | None = None) -> list[int]:
    spec = JobSpec("q", "t", "{}", None, timedelta(0), 1, unique_key=unique_key)
    if unique_key is not None:
        return [store.insert_unique(spec)[0].id for _ in range(count)]
    return [job.id for job in store.insert_many([[spec] * count])]


def fail_all(store: JobStore) -> list[int]:
    jobs = store.claim("q", batch=1000, lease=LEASE)
    for job in jobs:
        store.fail(job.id, job.attempts, "boom", permanent=True)
    return sorted(job.id for job in jobs)


def snapshot(dsn: str) -> list[tuple[Any, ...]]:
    """Every job's id, status and the transaction that last wrote it: what a write changes."""
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT id, status, xmin::text FROM pgkick.jobs ORDER BY id").fetchall()


def test_a_dry_run_counts_named_ids_and_purge_older_than_without_writing(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `--dry-run` refused beside job ids ("name job ids or give filters, not
    both") and beside `purge --older-than` ("give the created range as --until"): each
    form the real action takes counts what it would take, and writes nothing."""
    with JobStore.open(dsn) as store:
        insert(store, 3)
        failed = fail_all(store)
        queued = insert(store, 2)
        store.conn.execute(
            "UPDATE pgkick.jobs SET finished_at = now() - interval '8 days' WHERE id = %s",
            (failed[0],),
        )
    before = snapshot(dsn)
    code, out, err = run(capsys, "retry", *map(str, failed[:2]), "--dry-run", "--dsn", dsn)
    assert (code, err) == (0, "")
    assert (out["would_retry"], out["by_status"], out["dry_run"]) == (2, {"failed": 2}, True)
    code, out, _ = run(capsys, "cancel", str(queued[0]), "--dry-run", "--dsn", dsn)
    assert (code, out["would_cancel"], out["by_status"]) == (0, 1, {"queued": 1})
    code, out, _ = run(capsys, "purge", "--older-than", "7d", "--dry-run", "--dsn", dsn)
    assert (code, out["would_purge"], out["by_status"]) == (0, 1, {"failed": 1})
    assert snapshot(dsn) == before
    # the real action refuses a named job in the wrong state: so does its dry run
    code, out, err = run(capsys, "retry", str(queued[0]), "--dry-run", "--dsn", dsn)
    assert code == 1 and f"job {queued[0]} is queued" in err and "error" in out
    assert snapshot(dsn) == before
    code, out, _ = run(capsys, "purge", "--older-than", "7d", "--dsn", dsn)
    assert (code, out) == (0, {"purged": 1})


@pytest.mark.parametrize("form", [["--error", "boom"], ["--queue", "q"], ["ids"]])
def test_a_dry_run_of_a_retry_refuses_the_unique_key_conflict_the_retry_would(
    dsn: str, capsys: pytest.CaptureFixture[str], form: list[str]
) -> None:
    """Catches a dry run that counts "would_retry: 2" for a retry the real run refuses
    (a live job holds a failed job's unique key): the dry run refuses the same way, same
    line, same exit, before anything is written."""
    with JobStore.open(dsn) as store:
        insert(store, 1)
        insert(store, 1, unique_key="k")
        failed = fail_all(store)
        (holder,) = insert(store, 1, unique_key="k")  # a live job holds "k" again
    argv = [*map(str, failed)] if form == ["ids"] else form
    before = snapshot(dsn)
    code, out, err = run(capsys, "retry", *argv, "--dsn", dsn, "--yes")
    assert code == 1 and "error" in out
    assert f"unique key 'k' is held by queued job {holder}" in err
    assert snapshot(dsn) == before
    assert run(capsys, "retry", *argv, "--dry-run", "--dsn", dsn) == (code, out, err)
    if form[0] == "--error":  # a filter without --yes counts: it refuses too
        assert run(capsys, "retry", *argv, "--dsn", dsn) == (code, out, err)
    assert snapshot(dsn) == before


def test_purge_older_than_zero_counts_first_and_deletes_only_with_yes(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick purge --older-than 0d` deleting every finished job at once, with no
    count and no --yes (a typo of 10d, or a missing digit): a zero age selects everything
    finished, so it is counted first and acts only with --yes, as a purge by filter."""
    with JobStore.open(dsn) as store:
        insert(store, 2)
        store.complete_many(store.claim("q", batch=10, lease=LEASE))
        insert(store, 1)
        fail_all(store)
    before = snapshot(dsn)
    for zero in ("0d", "0s", "00m"):
        code, out, err = run(capsys, "purge", "--older-than", zero, "--dsn", dsn)
        assert (code, err) == (0, "")
        assert (out["would_purge"], out["by_status"]) == (3, {"done": 2, "failed": 1})
        assert out["to_act"] == "run it again with --yes"
    assert snapshot(dsn) == before
    code, out, _ = run(capsys, "purge", "--older-than", "0d", "--yes", "--dsn", dsn)
    assert (code, out) == (0, {"purged": 3}) and snapshot(dsn) == []


def test_a_purge_with_nothing_to_select_names_an_option_purge_has(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches `pgkick purge --dry-run` alone advising `--all`, which purge does not take
    (retry and cancel do); its every finished job is `--older-than 0d`. Refused before any
    connection: no database is named."""
    code, out, err = run(capsys, "purge", "--dry-run")
    assert code == 1
    assert "--older-than 0d" in err and "--all" not in err
    assert out == {"error": err.split(": ", 1)[1].strip()}
    code, _, err = run(capsys, "retry", "--dry-run")
    assert code == 1 and "--all" in err


def test_a_command_line_the_parser_refuses_prints_its_json_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches `--json` printing nothing when argparse refuses a value (`--rate 0/1m`,
    `--concurrency 0`): the docs promise one JSON document on stdout, a failure too."""
    for argv in (["limit", "mail", "--rate", "0/1m"], ["limit", "mail", "--concurrency", "0"]):
        with pytest.raises(SystemExit) as exited:
            cli.main([*argv, "--json"])
        captured = capsys.readouterr()
        assert exited.value.code == 2
        (line,) = captured.err.splitlines()
        assert json.loads(captured.out) == {"error": line.split(": ", 1)[1]}, argv
