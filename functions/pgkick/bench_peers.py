"""A peer queue on the same server in the same run: pgqueuer draining the same no-op jobs.

Why: "faster than the Python queues" means nothing unless measured next to one.
pgqueuer (the extra `peers`) gets its own tables in the same database, the same
number of jobs, and worker processes started the same way as pgkick's (cold,
separate processes, start-up included). It runs in its drain mode, which exits
once the queue is empty, so the wall time from start to the last exit is the
drain. Its statements are its own; pgkick's rule about sql/ covers pgkick's.

    python -m pgkick.bench_peers worker DSN BATCH   # one pgqueuer worker process
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

from pgkick.db import connect_async


def _require() -> Any:
    try:
        import pgqueuer
    except ImportError as exc:
        raise RuntimeError(
            "pgqueuer is not installed: run `uv run --extra peers pgkick bench --peers`"
        ) from exc
    return pgqueuer


async def _setup(dsn: str, jobs: int) -> float:
    """Install pgqueuer's schema if missing, empty its queue, enqueue `jobs`; returns jobs/s."""
    pgqueuer = _require()
    conn = await connect_async(dsn)
    queries = pgqueuer.Queries(pgqueuer.PsycopgDriver(conn))
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await queries.clear_queue()
    started = time.perf_counter()
    for start in range(0, jobs, 5_000):
        count = min(5_000, jobs - start)
        await queries.enqueue(["noop"] * count, [None] * count, [0] * count)
    rate = jobs / (time.perf_counter() - started)
    await conn.close()
    return rate


async def _noop(job: Any) -> None:
    return None


async def _worker(dsn: str, batch: int) -> None:
    pgqueuer = _require()
    from pgqueuer.types import QueueExecutionMode

    conn = await connect_async(dsn)
    pgq = pgqueuer.PgQueuer(pgqueuer.PsycopgDriver(conn))
    pgq.entrypoint("noop")(_noop)
    await pgq.run(batch_size=batch, mode=QueueExecutionMode.drain)


def pgqueuer_drain(dsn: str, jobs: int, *, processes: int, batch: int) -> dict[str, Any]:
    """Enqueue `jobs` no-ops with pgqueuer, drain them with `processes` workers, time it."""
    enqueue_rate = asyncio.run(_setup(dsn, jobs))
    started = time.monotonic()
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "pgkick.bench_peers", "worker", dsn, str(batch)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    errors = [w.communicate(timeout=1_800)[1] for w in workers]
    seconds = time.monotonic() - started
    failed = [e.strip()[-300:] for w, e in zip(workers, errors, strict=True) if w.returncode]
    if failed:
        raise RuntimeError(f"pgqueuer worker failed: {failed[0]}")
    return {
        "peer": "pgqueuer 1.6.0",
        "jobs": jobs,
        "processes": processes,
        "batch": batch,
        "seconds": round(seconds, 2),
        "jobs_per_s": round(jobs / seconds),
        "bulk_enqueue_jobs_per_s": round(enqueue_rate),
    }


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    asyncio.run(_worker(sys.argv[2], int(sys.argv[3])))
