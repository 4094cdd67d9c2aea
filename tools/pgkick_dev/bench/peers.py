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

Their statements are their own; pgkick's rule about sql/ covers pgkick's.

    python -m pgkick_dev.bench.peers worker PEER DSN BATCH drain|wait   # one worker process
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from pgkick.connections.db import Database
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.figures import percentile

PEERS = ("pgqueuer", "procrastinate")
VERSIONS = {"pgqueuer": "pgqueuer 1.6.0", "procrastinate": "procrastinate 3.10.0"}


def _require(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError as exc:
        raise RuntimeError(
            f"{name} is not installed: install the extra `pgkick[peers]` "
            "(`uv sync` in a checkout: the dev group includes it)"
        ) from exc


# -- pgqueuer ------------------------------------------------------------------------------
async def _pgqueuer_queries(dsn: str) -> tuple[Any, Any]:
    pgqueuer = _require("pgqueuer")
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    q = pgqueuer.Queries(pgqueuer.PsycopgDriver(conn))
    if not await q.has_table("pgqueuer"):
        await q.install()
    return conn, q


async def _pgqueuer_enqueue(dsn: str, jobs: int, single: int) -> dict[str, Any]:
    """Single enqueues (then cleared), then the drain's jobs in bulk: both rates."""
    conn, q = await _pgqueuer_queries(dsn)
    await q.clear_queue()
    singles = await _timed(single, lambda: q.enqueue("noop", None, 0))
    await q.clear_queue()
    started = time.perf_counter()
    for count in _chunks(jobs):
        await q.enqueue(["noop"] * count, [None] * count, [0] * count)
    bulk = jobs / (time.perf_counter() - started)
    await conn.close()
    return {"bulk_enqueue_jobs_per_s": round(bulk), **singles}


async def _pgqueuer_worker(dsn: str, batch: int, drain: bool, go: Callable[[], None]) -> None:
    pgqueuer = _require("pgqueuer")
    from pgqueuer.types import QueueExecutionMode

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    pgq = pgqueuer.PgQueuer(pgqueuer.PsycopgDriver(conn))

    async def noop(job: Any) -> None:
        return None

    pgq.entrypoint("noop")(noop)
    go()
    mode = QueueExecutionMode.drain if drain else QueueExecutionMode.continuous
    await pgq.run(batch_size=batch, mode=mode)


# -- procrastinate ---------------------------------------------------------------------------
def _procrastinate_app(dsn: str) -> tuple[Any, Any]:
    procrastinate = _require("procrastinate")
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=2)
    )

    @app.task(name="noop")  # type: ignore[untyped-decorator]
    async def noop() -> None:
        return None

    return app, noop


async def _procrastinate_enqueue(dsn: str, jobs: int, single: int) -> dict[str, Any]:
    """Single defers (then emptied), then the drain's jobs in bulk: both rates."""
    app, noop = _procrastinate_app(dsn)
    with Database.open(dsn, application_name="pgkick-bench") as db:
        async with app.open_async():
            if not db.one(dev_queries.PROCRASTINATE_SCHEMA_EXISTS)[0]:
                await app.schema_manager.apply_schema_async()
            db.execute(dev_queries.PROCRASTINATE_JOB_RESET)
            singles = await _timed(single, noop.defer_async)
            db.execute(dev_queries.PROCRASTINATE_JOB_RESET)
            started = time.perf_counter()
            for count in _chunks(jobs):
                await noop.batch_defer_async(*[{}] * count)
            bulk = jobs / (time.perf_counter() - started)
    return {"bulk_enqueue_jobs_per_s": round(bulk), **singles}


async def _procrastinate_worker(dsn: str, batch: int, drain: bool, go: Callable[[], None]) -> None:
    app, _ = _procrastinate_app(dsn)
    async with app.open_async():
        go()
        await app.run_worker_async(
            concurrency=1, wait=not drain, install_signal_handlers=False, name="bench"
        )


def _chunks(jobs: int, size: int = 5_000) -> list[int]:
    return [min(size, jobs - start) for start in range(0, jobs, size)]


async def _timed(count: int, call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    latencies = []
    started = time.perf_counter()
    for _ in range(count):
        one = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - one) * 1000)
    return {
        "single_enqueue_jobs_per_s": round(count / (time.perf_counter() - started)),
        "single_p50_ms": percentile(latencies, 0.5),
        "single_p99_ms": percentile(latencies, 0.99),
    }


# -- commit-to-start: a trickle of stamped jobs, each task prints how long after its enqueue
# call began it started (the caller's wall clock, one machine) ---------------------------------
def _stamp(sent: float) -> None:
    print(f"{(time.time() - sent) * 1000:.3f}", flush=True)


async def _pgqueuer_stamped(dsn: str, batch: int, drain: bool, go: Callable[[], None]) -> None:
    pgqueuer = _require("pgqueuer")
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    pgq = pgqueuer.PgQueuer(pgqueuer.PsycopgDriver(conn))

    async def stamp(job: Any) -> None:
        _stamp(float(job.payload.decode()))

    pgq.entrypoint("stamp")(stamp)
    go()
    await pgq.run(batch_size=batch)


async def _pgqueuer_trickle(dsn: str, rate: float, jobs: int, started: Callable[[], None]) -> None:
    conn, q = await _pgqueuer_queries(dsn)
    await q.clear_queue()
    started()
    await _paced(rate, jobs, lambda: q.enqueue("stamp", str(time.time()).encode(), 0))
    await conn.close()


def _procrastinate_stamping(dsn: str) -> tuple[Any, Any]:
    app, _ = _procrastinate_app(dsn)

    @app.task(name="stamp")  # type: ignore[untyped-decorator]
    async def stamp(sent: float) -> None:
        _stamp(sent)

    return app, stamp


async def _procrastinate_stamped(dsn: str, batch: int, drain: bool, go: Callable[[], None]) -> None:
    app, _ = _procrastinate_stamping(dsn)
    async with app.open_async():
        go()
        await app.run_worker_async(concurrency=1, install_signal_handlers=False, name="bench")


async def _procrastinate_trickle(
    dsn: str, rate: float, jobs: int, started: Callable[[], None]
) -> None:
    app, stamp = _procrastinate_stamping(dsn)
    with Database.open(dsn, application_name="pgkick-bench") as db:
        async with app.open_async():
            if not db.one(dev_queries.PROCRASTINATE_SCHEMA_EXISTS)[0]:
                await app.schema_manager.apply_schema_async()
            db.execute(dev_queries.PROCRASTINATE_JOB_RESET)
            started()
            await _paced(rate, jobs, lambda: stamp.defer_async(sent=time.time()))


async def _paced(rate: float, jobs: int, call: Callable[[], Awaitable[Any]]) -> None:
    start = time.monotonic()
    for i in range(jobs):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await call()


ENQUEUE = {"pgqueuer": _pgqueuer_enqueue, "procrastinate": _procrastinate_enqueue}
WORKER = {
    "pgqueuer": _pgqueuer_worker,
    "procrastinate": _procrastinate_worker,
    "pgqueuer-stamp": _pgqueuer_stamped,
    "procrastinate-stamp": _procrastinate_stamped,
}
TRICKLE = {"pgqueuer": _pgqueuer_trickle, "procrastinate": _procrastinate_trickle}


# -- the parent's side ---------------------------------------------------------------------
def _spawn(peer: str, dsn: str, batch: int, mode: str, log: Path) -> subprocess.Popen[str]:
    with log.open("a") as errors:
        return subprocess.Popen(
            [sys.executable, "-m", "pgkick_dev.bench.peers", "worker", peer, dsn, str(batch), mode],
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
    enqueue = asyncio.run(ENQUEUE[peer](dsn, jobs, singles))
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

        asyncio.run(TRICKLE[peer](dsn, rate, jobs, started))
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


def _worker_main(peer: str, dsn: str, batch: int, mode: str) -> None:
    def ready_then_wait() -> None:
        print("ready", flush=True)
        sys.stdin.readline()

    asyncio.run(WORKER[peer](dsn, batch, mode == "drain", ready_then_wait))


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
