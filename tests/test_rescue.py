"""The dead-man's switch (pgkick.worker.rescue): a worker that dies holding jobs is rescued by its
own wake-up at its leases' expiry, with no periodic reaper; one that finishes cleanly
leaves no wake-up behind."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import psycopg
import pytest

from pgkick.connections import db
from pgkick.kick.kickers import NoKicker
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.producer import enqueue as producer
from pgkick.store.worker import Announcement
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.local.context import FakeLambdaContext
from pgkick_dev.local.kicker import LocalKicker
from tests.aws import CallLog, create_worker_function
from tests.helpers import load_handler, seed, sessions_of
from tests.store import JobStore

ROOT = Path(__file__).parent.parent


@pytest.fixture
def local(dsn: str, tmp_path: Path) -> Iterator[LocalKicker]:
    """Lambda-like environments with 1 s leases and a 2 s timeout: a dead worker's leases
    expire about 5 s after it started (its remaining time plus its lease)."""
    (tmp_path / "runs").mkdir()
    kicker = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "PGKICK_TASKS": "tests.record_tasks",
            "PGKICK_TEST_RECORD": str(tmp_path / "runs"),
            "PYTHONPATH": str(ROOT),
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_LEASE_SECONDS": "1",
            "PGKICK_LEASE_MARGIN_SECONDS": "1",
            "PGKICK_MIN_REMAINING_MS": "200",
            "PGKICK_WORKER_LINGER_MS": "0",
        },
        concurrency=2,
        timeout_ms=2_000,
        retry_delays=(0.2, 0.4),
        fast_scheduler=True,  # the labelled kindness: rescues at the second, not the minute
        output=tmp_path / "workers.log",
    )
    yield kicker
    kicker.close()


def _statuses(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM pgkick.jobs GROUP BY 1").fetchall())


def _wait_running(dsn: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _statuses(dsn).get("running", 0) == 0:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.02)


@pytest.mark.parametrize("death", ["sigkill", "timeout"])
def test_a_dead_worker_is_rescued_by_its_own_wake_up_without_a_reaper(
    dsn: str, local: LocalKicker, death: str
) -> None:
    """Catches a worker that books no rescue (or cancels it even when it dies): with no
    reaper running, the job it held would stay `running` for good."""
    job_id = producer.enqueue_and_kick({}, task="hang_once", dsn=dsn, kicker=local)
    producer.enqueue_many(
        [{"payload": {}, "task": "noop"} for _ in range(5)], dsn=dsn, kicker=local
    )
    _wait_running(dsn)
    if death == "sigkill":  # else it hangs past its timeout and the kicker kills it
        # once its rescue is booked: through boto3 and HTTP that takes a moment after the
        # claim (boto3's import, as on Lambda), and a death before it waits for the reaper
        deadline = time.monotonic() + 30
        while not local.rescues():
            assert time.monotonic() < deadline, "the worker booked no rescue"
            time.sleep(0.02)
        (pid,) = local.processes()[:1]
        os.kill(pid, signal.SIGKILL)
    assert local.wait_idle(60, include_wakes=True)
    assert _statuses(dsn) == {"done": 6}
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT attempts FROM pgkick.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (2,)
    # the jobs the dead worker held came back through a rescue, not a reaper
    assert sum(r.get("rescued", 0) for r in local.stats.results if isinstance(r, dict)) >= 1
    assert local.rescues() == []
    if death == "timeout":
        assert local.stats.timeouts >= 1


def test_a_worker_that_finishes_cleanly_leaves_no_rescue_behind(
    dsn: str, local: LocalKicker
) -> None:
    producer.enqueue_many(
        [{"payload": {}, "task": "noop"} for _ in range(30)], dsn=dsn, kicker=local
    )
    assert local.wait_idle(30)
    assert _statuses(dsn) == {"done": 30}
    assert local.rescues() == []  # booked while it held jobs, cancelled when it finished


def test_on_aws_the_rescue_is_a_schedule_created_then_deleted(dsn: str, aws: None) -> None:
    """moto: the worker creates one schedule named for it when it first holds jobs, and
    deletes it when it finishes; none is left in the group."""
    arn = create_worker_function()
    log = CallLog()
    log.attach_default_session()
    kicker = LambdaKicker(
        "pgkick-worker",
        function_arn=arn,
        scheduler_role_arn="arn:aws:iam::123456789012:role/pgkick-scheduler",
    )
    registry = Registry()
    registry.task("noop")(lambda payload: None)
    with JobStore.open(dsn) as store:
        seed(store, 25)
        summary = Worker(store, registry, kicker, WorkerOptions(heartbeat=False)).drain(
            "default", lambda: 60_000
        )
    assert summary.done == 25
    (created,) = log.named("CreateSchedule")
    (deleted,) = log.named("DeleteSchedule")
    assert created["Name"].startswith("pgkick-rescue-") and deleted["Name"] == created["Name"]
    assert json.loads(created["Target"]["Input"]) == {"queue": "default", "reason": "rescue"}
    assert boto3.client("scheduler").list_schedules()["Schedules"] == []


def test_a_rescue_with_nothing_expired_is_one_connection_and_no_change(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="other")
    app = load_handler("worker")
    before = db.opened.count
    result = app.handler({"queue": "default", "reason": "rescue"}, FakeLambdaContext())
    assert (result["rescued"], result["claimed"]) == (0, 0)
    assert db.opened.count - before == 1 and sessions_of(dsn) == 0
    assert _statuses(dsn) == {"queued": 1}


def test_status_names_queues_whose_ready_jobs_wait_with_no_worker(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lost kick and a wake-up that could not be booked leave a ready job nobody will see
    before the (daily) reaper: `pgkick status` shows it once it waited past a threshold; a
    paused queue's jobs are not stranded (it says the queue is paused instead)."""
    from pgkick import cli

    past = datetime.now(UTC) - timedelta(minutes=5)
    producer.enqueue_and_kick(
        {}, task="noop", queue="lost", run_at=past, dsn=dsn, kicker=NoKicker()
    )
    producer.enqueue_and_kick({}, task="noop", queue="fresh", dsn=dsn, kicker=NoKicker())
    assert cli.main(["status", "--dsn", dsn, "--json", "--stranded-after", "1m"]) == 0
    assert json.loads(capsys.readouterr().out)["stranded"] == {"lost": 1}
    # a paused queue's ready jobs wait for `pgkick resume`, not for a lost kick: not stranded
    assert cli.main(["pause", "lost", "--dsn", dsn]) == 0
    capsys.readouterr()
    assert cli.main(["status", "--dsn", dsn, "--json", "--stranded-after", "1m"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["stranded"] == {}
    assert [(q["queue"], q["paused"]) for q in said["queues"]] == [("fresh", False), ("lost", True)]
    with JobStore.open(dsn) as store:  # resumed (without the kick `pgkick resume` sends)
        store.execute("UPDATE pgkick.queue_limits SET paused = false")
    with JobStore.open(dsn) as worker:  # a worker watching the queue: it will see the job
        worker.complete_many_and_claim(
            [],
            "elsewhere",
            batch=1,
            lease=timedelta(minutes=5),
            announce=Announcement("w1", timedelta(seconds=30)),
        )
        worker.execute("UPDATE pgkick.queue_watchers SET queue = 'lost'")
    assert cli.main(["status", "--dsn", dsn, "--json", "--stranded-after", "1m"]) == 0
    assert json.loads(capsys.readouterr().out)["stranded"] == {}


class _NoScheduler:
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        return None

    def wake_at(self, queue: str, when: datetime) -> None:
        raise ConnectionError("Scheduler unreachable")


def test_a_wake_up_that_cannot_be_booked_is_logged_with_its_job_and_counted(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = producer.stats.wake_failures
    job_id = producer.enqueue_and_kick({}, task="noop", delay=600, dsn=dsn, kicker=_NoScheduler())
    assert producer.stats.wake_failures == before + 1
    assert any(str(job_id) in record.getMessage() for record in caplog.records)
