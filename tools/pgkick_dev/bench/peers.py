"""Peer queues on the same server in the same run: pgqueuer and procrastinate.

Why: "faster than the Python queues" and "the others keep the database awake"
mean nothing unless measured next to them. Each peer (the extra `peers`) gets
its own tables in the same database and the same no-op jobs, and is measured
as it is meant to run (long-lived worker processes):

- drain: worker processes started cold; each connects, says "ready", and waits
  for "go". Two rates come out: from spawn until the last job is done (start-up
  included, as pgkick's local drain is measured) and from "go" until then
  (warm). "Done" is read from the peer's table every 10 ms, because a peer's
  drain mode lingers after the queue is empty (pgqueuer waits ~5 s to exit);
- bulk and single enqueue rates, through the peer's own API;
- idle statements a minute: one worker waiting on an empty queue, counted by
  pg_stat_statements (what keeps a scale-to-zero compute awake).

Their statements are their own; pgkick's rule about sql/ covers pgkick's. Each
peer's own API (its enqueues, its workers, the worker process's entry point) is in
pgkick_dev.bench.peer_apis: this module spawns the processes and measures them.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pgkick.connections.db import Database
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench import peer_apis
from pgkick_dev.bench.figures import percentile

PEERS = ("pgqueuer", "procrastinate")
VERSIONS = {"pgqueuer": "pgqueuer 1.6.0", "procrastinate": "procrastinate 3.10.0"}


def _spawn(peer: str, dsn: str, batch: int, mode: str, log: Path) -> subprocess.Popen[str]:
    with log.open("a") as errors:
        return subprocess.Popen(
            [sys.executable, "-m", peer_apis.__name__, "worker", peer, dsn, str(batch), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )


def _ready(worker: subprocess.Popen[str]) -> None:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    if line.strip() != "ready":
        worker.kill()
        raise RuntimeError(f"peer worker failed to start (exit {worker.wait()}); see its log")


def _go(worker: subprocess.Popen[str]) -> None:
    assert worker.stdin is not None
    worker.stdin.write("go\n")
    worker.stdin.close()


def drain(
    dsn: str, peer: str, jobs: int, *, processes: int, batch: int, singles: int, log: Path
) -> dict[str, Any]:
    """Enqueue `jobs` no-ops with the peer, drain them with `processes` workers, time it."""
    enqueue = asyncio.run(peer_apis.ENQUEUE[peer](dsn, jobs, singles))
    spawned = time.monotonic()
    workers = [_spawn(peer, dsn, batch, "drain", log) for _ in range(processes)]
    for worker in workers:
        _ready(worker)
    go = time.monotonic()
    for worker in workers:
        _go(worker)
    ended, left = _wait_done(dsn, peer, workers)
    codes = [worker.wait(timeout=1_800) for worker in workers]
    if any(codes):
        raise RuntimeError(f"{peer} worker exited with {codes}; see {log}")
    return {
        "peer": VERSIONS[peer],
        "jobs": jobs,
        "processes": processes,
        "batch": batch,
        "jobs_per_s_with_startup": round(jobs / (ended - spawned)),
        "jobs_per_s_warm": round(jobs / (ended - go)),
        "jobs_left": left,
        **enqueue,
    }


def _wait_done(dsn: str, peer: str, workers: list[subprocess.Popen[str]]) -> tuple[float, int]:
    """When the peer's table shows no job left, or every worker has exited (then: how many
    jobs it left behind)."""
    with Database.open(dsn, application_name="pgkick-bench") as db:
        while (left := _count_left(db, peer)) and any(w.poll() is None for w in workers):
            time.sleep(0.01)
    return time.monotonic(), left


def _count_left(db: Database, peer: str) -> int:
    if peer == "pgqueuer":  # a job leaves pgqueuer's table once it is done
        return int(db.one(dev_queries.PGQUEUER_JOB_COUNT)[0])
    counts = dict(db.rows(dev_queries.PROCRASTINATE_JOB_COUNT_BY_STATUS))
    return sum(n for status, n in counts.items() if status != "succeeded")


def commit_to_start(dsn: str, peer: str, rate: float, jobs: int, log: Path) -> dict[str, Any]:
    """A trickle of `jobs` single enqueues at `rate` a second through the peer's API, one
    long-lived worker (LISTENing, as the peer runs by default): how long after each enqueue
    call began its task started, p50 and p99 (pgkick's `trickle` item reads claimed_at -
    created_at, the insert's start: the same two ends, give or take the task's dispatch)."""
    worker = _spawn(f"{peer}-stamp", dsn, 10, "wait", log)
    waits: list[float] = []
    guard = threading.Timer(jobs / rate + 120, worker.kill)  # a job that never starts
    guard.start()
    try:
        _ready(worker)

        def started() -> None:  # the peer's tables exist: let its worker in, then settle
            _go(worker)
            time.sleep(2)

        asyncio.run(peer_apis.TRICKLE[peer](dsn, rate, jobs, started))
        assert worker.stdout is not None
        while len(waits) < jobs and (line := worker.stdout.readline()):
            waits.append(float(line))
    finally:
        guard.cancel()
        worker.kill()
        worker.wait()
    return {
        "peer": VERSIONS[peer],
        "jobs": jobs,
        "started": len(waits),
        "commit_to_start_p50_ms": percentile(waits, 0.5),
        "commit_to_start_p99_ms": percentile(waits, 0.99),
    }


def idle_statements_per_minute(dsn: str, peer: str | None, seconds: float, log: Path) -> float:
    """Statements a minute in this database while one worker waits on an empty queue
    (peer None: pgkick, which has no process at all between kicks)."""
    worker = _spawn(peer, dsn, 10, "wait", log) if peer else None
    try:
        if worker:
            _ready(worker)
            _go(worker)
            time.sleep(2)  # past its start-up statements
        with Database.open(dsn, application_name="pgkick-bench") as db:
            db.execute(dev_queries.STATEMENT_STATS_INSTALL)
            before = int(db.one(dev_queries.STATEMENT_CALL_TOTAL)[0])
            time.sleep(seconds)
            after = int(db.one(dev_queries.STATEMENT_CALL_TOTAL)[0])
    finally:
        if worker:
            worker.kill()
            worker.wait()
    return round((after - before) * 60 / seconds, 1)
