"""A cancel reaches a running task within seconds whatever the lease, and concurrent waits
share the producer's few connections (issue 31.6).

The worker runs in a thread with Lambda's lease (300 s: an extension every 100 s); the
cancel is a real `pgkick cancel` process. The waits are 20 app threads."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pgkick
from pgkick.connections import linger
from pgkick.connections import pool as linger_pool
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.helpers import job_row, seed, sessions_of
from tests.spies import WAIT
from tests.store import JobStore

LAMBDA_LEASE = timedelta(seconds=300)  # at least the invocation's time plus a margin
TARGET = 5.0  # seconds from the cancel to the task's `cancelled` event


def test_a_cancel_reaches_the_task_within_seconds_under_a_300_s_lease(dsn: str) -> None:
    """Catches a keeper that learns of a cancel only from its extensions (every third of
    the lease: ~100 s here, the task would run on past the test's 30 s)."""
    started, seen = threading.Event(), {}
    tasks = Registry()

    @tasks.task("long")
    def long(payload: Any, job: JobContext) -> None:
        started.set()
        if job.cancelled.wait(30):
            seen["at"] = time.monotonic()

    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1, task="long")
        options = WorkerOptions(batch=1, lease=LAMBDA_LEASE, max_fanout=0, heartbeat=True)
        summaries = []
        worker = threading.Thread(
            target=lambda: summaries.append(
                Worker(store, tasks, NoKicker(), options).drain("default", lambda: 600_000)
            )
        )
        worker.start()
        assert started.wait(WAIT)
        pgkick_cli = str(Path(sys.executable).parent / "pgkick")
        run = subprocess.run(
            [pgkick_cli, "cancel", str(job_id), "--dsn", dsn],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PGKICK_KICKER": "none", "PATH": "/usr/bin:/bin"},
        )
        cancelled_at = time.monotonic()
        assert run.returncode == 0, run.stderr
        worker.join(60)
    assert "at" in seen, "the task never learnt of the cancel"
    latency = seen["at"] - cancelled_at
    print(f"cancel seen {latency:.2f} s after `pgkick cancel` returned (lease 300 s)")
    assert latency <= TARGET
    row = job_row(dsn, job_id)
    assert (row["status"], row["last_error"]) == ("failed", "cancelled by operator")
    assert summaries[0].failed == 1


def test_twenty_threads_waiting_share_the_producers_few_connections(dsn: str) -> None:
    """Catches wait() on the single lingering connection, where every thread that found it
    busy opened a connection of its own for each look (33 for 20 threads)."""
    linger.close_all()  # the shared connection and pools, and their counts, start afresh
    with JobStore.open(dsn) as store:
        ids = seed(store, 20, task="noop")
    before = linger.opened_total()  # the lone connection's and the pools' (their source)
    gate = threading.Barrier(21)
    results: dict[int, Any] = {}

    def waiter(job_id: int) -> None:
        gate.wait(WAIT)
        results[job_id] = pgkick.wait(job_id, timeout=60, dsn=dsn)

    threads = [threading.Thread(target=waiter, args=(job_id,)) for job_id in ids]
    for thread in threads:
        thread.start()
    gate.wait(WAIT)
    peak = 0
    tasks = Registry()
    tasks.task("noop")(lambda payload: "ok")
    with JobStore.open(dsn) as store:
        for _ in range(10):  # the waiters look a few times while the jobs wait
            peak = max(peak, sessions_of(dsn, linger.APPLICATION_NAME))
            time.sleep(0.05)
        Worker(store, tasks, NoKicker(), WorkerOptions(heartbeat=False)).drain(
            "default", lambda: 600_000
        )
    for thread in threads:
        thread.join(WAIT)
    opened = linger.opened_total() - before
    print(f"20 waiting threads opened {opened} connections, at most {peak} at once")
    assert results == {job_id: "ok" for job_id in ids}
    assert opened <= linger_pool.DEFAULT_SIZE and peak <= linger_pool.DEFAULT_SIZE
