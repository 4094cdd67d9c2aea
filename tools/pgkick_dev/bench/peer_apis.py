"""Each peer queue driven through its own API: pgqueuer's and procrastinate's enqueues,
workers and trickles, and the entry point of a peer's worker process.

Why apart from pgkick_dev.bench.peers: that module measures (it spawns the worker
processes, times them, reads the peers' tables and pg_stat_statements); this one
calls into the peers' libraries (the only module importing pgqueuer or procrastinate)
and is what a peer's worker process runs. Each peer gets the same no-op jobs
(and, for the commit-to-start trickle, jobs stamped with their enqueue call's wall
clock); their statements are their own, pgkick's rule about sql/ covers pgkick's.

    python -m pgkick_dev.bench.peer_apis worker PEER DSN BATCH drain|wait   # one worker process
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from pgkick.connections.db import Database
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.figures import percentile


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
    async with app.open_async():
        await _procrastinate_fresh(app, dsn)
        singles = await _timed(single, noop.defer_async)
        await _procrastinate_fresh(app, dsn)
        started = time.perf_counter()
        for count in _chunks(jobs):
            await noop.batch_defer_async(*[{}] * count)
        bulk = jobs / (time.perf_counter() - started)
    return {"bulk_enqueue_jobs_per_s": round(bulk), **singles}


async def _procrastinate_fresh(app: Any, dsn: str) -> None:
    """procrastinate's schema, applied if this database lacks it, and no job in it (its app
    open: the schema is applied through it)."""
    with Database.open(dsn, application_name="pgkick-bench") as db:
        if not db.one(dev_queries.PROCRASTINATE_SCHEMA_EXISTS)[0]:
            await app.schema_manager.apply_schema_async()
        db.execute(dev_queries.PROCRASTINATE_JOB_RESET)


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
    async with app.open_async():
        await _procrastinate_fresh(app, dsn)
        started()
        await _paced(rate, jobs, lambda: stamp.defer_async(sent=time.time()))


async def _paced(rate: float, jobs: int, call: Callable[[], Awaitable[Any]]) -> None:
    start = time.monotonic()
    for i in range(jobs):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await call()


# -- single enqueues in turns (pgkick_dev.bench.producers alternates them with pgkick's) ---
async def _pgqueuer_single(dsn: str) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Any]]:
    conn, q = await _pgqueuer_queries(dsn)
    await q.clear_queue()
    return (lambda: q.enqueue("noop", None, 0)), conn.close


async def _procrastinate_single(
    dsn: str,
) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Any]]:
    app, noop = _procrastinate_app(dsn)
    opened = contextlib.AsyncExitStack()  # the app's connection, open across the turns
    await opened.enter_async_context(app.open_async())
    try:
        await _procrastinate_fresh(app, dsn)
    except BaseException:
        await opened.aclose()
        raise
    return noop.defer_async, opened.aclose


class SingleTurns:
    """A peer's single enqueue through its own API, a turn at a time, on one event loop and
    one warm connection (opened before the first turn, not timed), for turns alternated
    with pgkick's and pgbench's over one stretch of time."""

    def __init__(self, peer: str, dsn: str) -> None:
        self._loop = asyncio.Runner()
        try:
            self._call, self._close = self._loop.run(_SINGLE[peer](dsn))
        except BaseException:
            self._loop.close()
            raise
        try:
            self.turn(1)  # the first call's one-off costs (the peer's statement text, caches)
        except BaseException:
            self.close()
            raise

    def turn(self, calls: int) -> float:
        """Seconds `calls` single enqueues took, one after another."""

        async def timed() -> float:
            started = time.perf_counter()
            for _ in range(calls):
                await self._call()
            return time.perf_counter() - started

        return self._loop.run(timed())

    def close(self) -> None:
        closing = self._close()
        if asyncio.iscoroutine(closing):
            self._loop.run(closing)
        self._loop.close()


_SINGLE = {"pgqueuer": _pgqueuer_single, "procrastinate": _procrastinate_single}
ENQUEUE = {"pgqueuer": _pgqueuer_enqueue, "procrastinate": _procrastinate_enqueue}
WORKER = {
    "pgqueuer": _pgqueuer_worker,
    "procrastinate": _procrastinate_worker,
    "pgqueuer-stamp": _pgqueuer_stamped,
    "procrastinate-stamp": _procrastinate_stamped,
}
TRICKLE = {"pgqueuer": _pgqueuer_trickle, "procrastinate": _procrastinate_trickle}


def _worker_main(peer: str, dsn: str, batch: int, mode: str) -> None:
    def ready_then_wait() -> None:
        print("ready", flush=True)
        sys.stdin.readline()

    asyncio.run(WORKER[peer](dsn, batch, mode == "drain", ready_then_wait))


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
