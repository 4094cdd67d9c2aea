"""Real worker processes through the local kicker: exactly once, then nothing at all."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgkick.producer import enqueue as producer
from pgkick_dev.local.kicker import LocalKicker
from tests.helpers import sessions_of, statement_calls
from tests.record_tasks import executions

ROOT = Path(__file__).parent.parent


@pytest.fixture
def local(dsn: str, tmp_path: Path) -> Iterator[LocalKicker]:
    (tmp_path / "runs").mkdir()
    kicker = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "PGKICK_TASKS": "tests.record_tasks",
            "PGKICK_TEST_RECORD": str(tmp_path / "runs"),
            "PYTHONPATH": str(ROOT),
            "PGKICK_LEASE_SECONDS": "60",
        },
        concurrency=8,
        retry_delays=(0.2, 0.4),  # Lambda's 1 and 2 minutes, scaled down
        output=tmp_path / "workers.log",
        fast_scheduler=True,  # the labelled kindness: wake-ups at the second, not the minute
    )
    yield kicker
    kicker.close()


def pgkick_statements(dsn: str) -> int:
    """Calls of pgkick's own statements in this database (each starts with its name)."""
    return statement_calls(dsn, ["-- job\\_%", "-- migration\\_%", "-- queue\\_%"])


def test_eight_processes_drain_10000_jobs_exactly_once_then_go_quiet(
    dsn: str, local: LocalKicker, tmp_path: Path
) -> None:
    for _ in range(8):  # warm eight environments (eight cold starts), like a burst of kicks
        local.kick("default", "manual")
    assert local.wait_idle(60)
    assert local.stats.cold_starts == 8

    ids = producer.enqueue_many(
        [{"payload": {"n": n}, "task": "record"} for n in range(10_000)], dsn=dsn, kicker=local
    )
    for _ in range(7):  # and seven more kicks, so all eight work at once
        local.kick("default", "manual")
    assert local.wait_idle(120)

    runs = executions(tmp_path / "runs")
    per_job = Counter(job_id for lines in runs.values() for job_id, _ in lines)
    assert set(per_job) == set(ids) and set(per_job.values()) == {1}  # each exactly once
    assert len(runs) == 8, {pid: len(lines) for pid, lines in runs.items()}
    assert local.stats.crashes == 0 and local.stats.cold_starts == 8
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT status, min(attempts), max(attempts), count(*) FROM pgkick.jobs GROUP BY 1"
        ).fetchall() == [("done", 1, 1, 10_000)]

    # Idle: no pgkick session, and not one statement from pgkick for 30 seconds.
    assert sessions_of(dsn) == 0
    before = pgkick_statements(dsn)
    assert before > 0  # the counter sees pgkick's statements (so zero below means zero)
    time.sleep(30)
    assert pgkick_statements(dsn) == before
    assert sessions_of(dsn) == 0


def test_a_delayed_job_is_woken_by_a_timer_at_its_run_at(
    dsn: str, local: LocalKicker, tmp_path: Path
) -> None:
    """No polling: the enqueue books a wake-up; until it fires nothing runs."""
    job_id = producer.enqueue_and_kick({}, task="record", delay=1.5, dsn=dsn, kicker=local)
    assert local.stats.invocations == 0  # not ready: no kick, only a timer
    assert local.wait_idle(30, include_wakes=True)
    assert local.stats.invocations == 1
    assert executions(tmp_path / "runs") != {}
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT status FROM pgkick.jobs WHERE id = %s", (job_id,)
        ).fetchone() == ("done",)
