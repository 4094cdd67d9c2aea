"""`pgkick bench` items enqueue and kick_to_start: what one caller pays to enqueue, and what a
kick costs before its job starts.

Why beside pgbench: a single `enqueue_and_kick` waits for its durable commit, so its
honest yardstick is the same insert sent by pgbench, one client, a commit each (what the
disk allows one caller), measured in the same run; `enqueue_many` is the bulk path, and
the app-transaction form is what a web request that enqueues pays. Kick-to-start runs on
a warm environment whose worker left (no linger): the start-up a kick buys, not a
lingering worker's wake-up (that is the trickle item).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pgkick.connections.db import Database
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.bench import pgbench as bench_sql
from pgkick_dev.bench import producers as bench_producers
from pgkick_dev.bench.figures import percentile
from pgkick_dev.local.kicker import LocalKicker

if TYPE_CHECKING:
    from pgkick_dev.bench.runner import Bench


def rates(bench: Bench) -> dict[str, Any]:
    """Single enqueues with no kicker, through the local stack and in an app's transaction;
    pgbench's same insert; enqueue_many of `sizes.many` jobs."""
    bench.reset()
    singles = bench.sizes.singles
    out: dict[str, Any] = {}
    out["single_none"] = one_at_a_time(
        singles,
        lambda: producer.enqueue_and_kick({}, task="noop", dsn=bench.dsn, kicker=NoKicker()),
    )
    local = LocalKicker(env={"DATABASE_URL": bench.dsn}, concurrency=2, output=bench.log)
    out["single_local"] = one_at_a_time(
        singles, lambda: producer.enqueue_and_kick({}, task="noop", dsn=bench.dsn, kicker=local)
    )
    local.wait_idle(120)
    local.close()
    out["single_in_app_transaction"] = _on_app_connection(bench.dsn, singles)
    out["single_sql_ceiling"] = _single_insert_ceiling(bench)
    out["single_beside_pgbench"] = bench_producers.single_beside_pgbench(bench)
    bench.reset()
    jobs = [{"payload": {"n": n}, "task": "noop"} for n in range(bench.sizes.many)]
    started = time.monotonic()
    producer.enqueue_many(jobs, dsn=bench.dsn, kicker=NoKicker())
    out["many"] = {
        "jobs": bench.sizes.many,
        "jobs_per_s": round(bench.sizes.many / (time.monotonic() - started)),
    }
    return out


def kick_to_start(bench: Bench) -> dict[str, Any]:
    """Created-to-claimed of jobs each kicked into a warm environment whose worker had left
    (linger off), the first one (a cold start) left out."""
    bench.reset()
    local = LocalKicker(
        env={"DATABASE_URL": bench.dsn, "PGKICK_WORKER_LINGER_MS": "0"},
        concurrency=2,
        output=bench.log,
    )
    ids = []
    for _ in range(bench.sizes.latency_samples):
        ids.append(producer.enqueue_and_kick({}, task="noop", dsn=bench.dsn, kicker=local))
        local.wait_idle(60)
    local.close()
    with bench.store() as store:
        jobs = store.get_many(ids[1:])  # the first one paid the cold start
    waits = [(j["claimed_at"] - j["created_at"]).total_seconds() * 1000 for j in jobs]
    return {
        "p50": percentile(waits, 0.5),
        "p99": percentile(waits, 0.99),
        "samples": len(waits),
    }


def one_at_a_time(count: int, call: Callable[[], object]) -> dict[str, Any]:
    """`count` calls in a row: the rate, and each call's latency."""
    latencies = []
    started = time.monotonic()
    for _ in range(count):
        one = time.perf_counter()
        call()
        latencies.append((time.perf_counter() - one) * 1000)
    return {
        "jobs_per_s": round(count / (time.monotonic() - started)),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
    }


def _on_app_connection(dsn: str, count: int) -> dict[str, Any]:
    """One job per transaction on a connection the app keeps (its pool's), kicked after
    each commit (none kicker): what a web request that enqueues pays."""
    with Database.open(dsn, autocommit=False, application_name="app") as app:

        def one_job() -> None:
            with producer.transaction(app.conn, kicker=NoKicker()) as jobs:
                jobs.enqueue({}, task="noop")

        return one_at_a_time(count, one_job)


def _single_insert_ceiling(bench: Bench) -> dict[str, Any]:
    """pgbench, one client, one job per durable commit: what the disk allows one caller."""
    bench.reset()
    n = bench.sizes.singles
    run = bench_sql.pgbench(
        bench.bin_dir, bench.dsn, bench_sql.insert_one(), clients=1, transactions=n
    )
    return {"jobs_per_s": round(n / run.seconds)}
