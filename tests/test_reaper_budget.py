"""The reaper within its time budget (issue #30, defect 5): it reports queue health first
(its metrics flushed before any purge), then purges in batches while the invocation has
time left, and says what it left for the next run. Real PostgreSQL with 25,000 finished
jobs; the invocation's remaining time comes from a context whose clock advances one
second each time it is read (one read per purge batch), so the budget is exact."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick.producer.enqueue import Enqueuer
from pgkick.store.flow import pause_queue
from pgkick.worker.reaper import PURGE_RESERVE
from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import FakeClock, event, load_handler, seed, sessions_of
from tests.store import JobStore

FINISHED = 25_000  # three batches of the reaper's 10,000


class Ticking:
    """A clock that advances one second per read: a purge batch costs one second."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        value = self.now
        self.now += 1.0
        return value


def finished_jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgkick.jobs WHERE status = 'done'").fetchone()
        return int(row[0]) if row else 0


def emitted(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]


@pytest.fixture
def old_finished_jobs(dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    with JobStore.open(dsn) as store:
        seed(store, FINISHED)
        seed(store, 2, queue="mail")  # ready: the health report must count them
        store.conn.execute(
            "UPDATE pgkick.jobs SET status = 'done', finished_at = now() - interval '30 days'"
            " WHERE queue = 'default'"
        )
    return dsn


def test_a_tiny_budget_reports_first_purges_what_fits_and_says_what_is_left(
    old_finished_jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a purge that loops without looking at the time (on a large first purge the
    run times out daily, its report is lost and the oldest-ready alarm goes blind), and a
    health report emitted only at the end. Budget: the reserve plus 2.5 s, so two batches
    start (16.5 s and 15.5 s left) and the third does not (14.5 s)."""
    budget = int(PURGE_RESERVE.total_seconds() * 1000) + 2_500
    context = FakeLambdaContext(function_name="pgkick-reaper", timeout_ms=budget, clock=Ticking())
    capsys.readouterr()
    report = load_handler("reaper").handler(event("reaper"), context)
    assert (report["purged"], report["purge_complete"]) == (20_000, False)
    assert finished_jobs(old_finished_jobs) == FINISHED - 20_000  # left for the next run
    assert {q["queue"]: q["ready"] for q in report["queues"]}["mail"] == 2
    health, tail = emitted(capsys.readouterr().out)  # two flushes, the health one first
    assert health["ready"] and "oldest_ready_age" in health and "reaper_purged" not in health
    assert (tail["reaper_purged"], tail["reaper_purge_left"]) == ([20_000], [1])
    assert sessions_of(old_finished_jobs) == 0

    # the next run, with time to spare, finishes the purge and says so
    context = FakeLambdaContext(function_name="pgkick-reaper", timeout_ms=120_000)
    report = load_handler("reaper").handler(event("reaper"), context)
    assert (report["purged"], report["purge_complete"]) == (5_000, True)
    assert finished_jobs(old_finished_jobs) == 0


def test_a_paused_queue_feeds_no_oldest_ready_age(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches the reaper emitting a paused queue's oldest ready age: pausing a queue past
    OldestReadyAlarmSeconds fired OldestReadyJobAlarm ("the reaper kicks its queue; find
    why its kick and wake-up were lost"), though a paused queue is kicked by nobody on
    purpose and `stranded` leaves it out. Its age is still in the report (a review of the
    reaper, F3)."""
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="held")
        seed(store, 1, queue="mail")
        pause_queue(store, "held")
    capsys.readouterr()
    context = FakeLambdaContext(function_name="pgkick-reaper", timeout_ms=120_000)
    report = load_handler("reaper").handler(event("reaper"), context)
    ages = {q["queue"]: q["oldest_ready_seconds"] for q in report["queues"]}
    assert ages["held"] is not None and ages["mail"] is not None
    health = emitted(capsys.readouterr().out)[0]
    assert len(health["oldest_ready_age"]) == 1  # mail's only
    assert len(health["ready"]) == 2


def test_a_dependant_just_released_is_not_reported_ready_for_the_time_it_waited(
    dsn: str, clock: FakeClock
) -> None:
    """Catches the reaper's oldest ready age (and `stranded`) measured from a dependant's
    run_at: released a moment ago by its parent, a job enqueued an hour earlier read as an
    hour ready and fired OldestReadyJobAlarm. It is ready since its parent finished (a
    review of the reaper, F2)."""
    with JobStore.open(dsn, clock) as store:
        enqueue = Enqueuer(store).enqueue
        parent = enqueue({}, task="t", queue="slow", delay=3600)
        enqueue({}, task="t", queue="joined", after=[parent])
        clock.advance(3600)
        (job,) = store.claim("slow", batch=1, lease=timedelta(minutes=5))
        clock.advance(30)
        assert store.complete(job.id, job.attempts)
        clock.advance(5)
        stats = {q["queue"]: q for q in store.stats_by_queue(timedelta(seconds=1))}
    assert stats["joined"]["ready"] == 1
    assert float(stats["joined"]["oldest_ready_seconds"]) == pytest.approx(5, abs=0.01)
    assert stats["joined"]["stranded"] == 1  # past the 1 s given, nobody watching
