"""`pgkick bench` item `kicks`: what single enqueues cost in invocations and database sessions.

Why: on Lambda every kick is an invocation and every invocation a database
session (a TLS + SCRAM handshake on a serverless database), so this is the
figure that decides the bill. The kicker is the faithful local one (every event
kept, as Lambda's asynchronous queue keeps it): a trickle at a steady rate and
a burst of single `enqueue_and_kick` calls, each job checked done exactly once.
The same trickle runs again with the worker's linger off, to show the trade:
invocations and sessions saved against Lambda time spent lingering.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgkick.connections import linger
from pgkick.connections.db import Database, opened
from pgkick.producer import enqueue as producer
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.figures import percentile
from pgkick_dev.local.kicker import LocalKicker
from pgkick_dev.sessions import SessionCounter


@dataclass(frozen=True)
class KickLoad:
    label: str
    rate: float | None  # jobs a second, None: as fast as one caller goes (a burst)
    jobs: int
    linger_ms: int = 1000  # the worker's default
    listen: str = "auto"  # PGKICK_WORKER_LISTEN: off measures the pauses alone


def loads(seconds: float, burst: int) -> list[KickLoad]:
    return [
        KickLoad("steady 50/s", 50, round(50 * seconds)),
        KickLoad("steady 400/s", 400, round(400 * seconds)),
        KickLoad(f"burst of {burst}", None, burst),
        KickLoad("steady 50/s, linger off", 50, round(50 * seconds), linger_ms=0),
    ]


def measure(dsn: str, load: KickLoad, log: Path, concurrency: int = 4) -> dict[str, Any]:
    """Run one load on fresh environments; count invocations, sessions, Lambda time."""
    with Database.open(dsn, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
        store.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    local = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_WORKER_LINGER_MS": str(load.linger_ms),
            "PGKICK_WORKER_LISTEN": load.listen,
        },
        concurrency=concurrency,
        timeout_ms=900_000,
        output=log,
    )
    producers_before = linger.opened_total()
    sessions, ours_before = SessionCounter(dsn), opened.count
    try:
        started = time.monotonic()
        _paced(load, lambda: producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=local))
        sent_in = time.monotonic() - started
        local.wait_idle(600, include_wakes=True)
    finally:
        local.close()
    linger.close_all()  # the producers' lingering connections end: counted, then set apart
    producer_sessions = linger.opened_total() - producers_before
    # PostgreSQL's count of every session, less those this process opened (its producers)
    worker_sessions = sessions.opened() - (opened.count - ours_before)
    with Database.open(dsn, application_name="pgkick-bench") as store:
        rows = store.dicts(dev_queries.JOB_LATENCY_ALL)
    claimed = sum(r.get("claimed", 0) for r in local.stats.results if isinstance(r, dict))
    waits = [float(row["wait_ms"]) for row in rows if row["wait_ms"] is not None]
    stats = local.stats
    return {
        "load": load.label,
        "jobs": load.jobs,
        "seconds": round(sent_in, 1),
        "invocations": stats.invocations,
        "invocations_per_job": round(stats.invocations / load.jobs, 4),
        "worker_sessions": worker_sessions,
        "worker_sessions_per_job": round(worker_sessions / load.jobs, 4),
        "producer_sessions": producer_sessions,
        "throttles": stats.throttles,
        "dropped": len(stats.failed_kicks),
        "lambda_seconds": round(
            sum(r.get("duration_ms", 0) for r in stats.results if isinstance(r, dict)) / 1000, 1
        ),
        "commit_to_claim_p50_ms": percentile(waits, 0.5),
        "commit_to_claim_p99_ms": percentile(waits, 0.99),
        "executions": claimed,
        "errors": stats.errors + stats.crashes + stats.timeouts,
        "exactly_once": claimed == load.jobs
        and len(rows) == load.jobs
        and all(r["status"] == "done" and r["attempts"] == 1 for r in rows),
    }


def _paced(load: KickLoad, call: Callable[[], object]) -> None:
    """`load.jobs` calls, the i-th at start + i / rate (or back to back for a burst)."""
    start = time.monotonic()
    for i in range(load.jobs):
        if load.rate is not None:
            delay = start + i / load.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        call()


def run(dsn: str, *, seconds: float, burst: int, log: Path, say: Callable[[str], None]) -> Any:
    rows = []
    for load in loads(seconds, burst):
        rows.append(measure(dsn, load, log))
        say(f"kicks: {rows[-1]}")
    return rows
