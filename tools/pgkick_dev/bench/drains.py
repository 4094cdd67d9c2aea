"""`pgkick bench` items article_table, drain and scale: a seeded queue drained, every job counted.

Why apart from the runner: these three measure pgkick's claim itself, in line, where
the runner only holds what every item shares (the sizes, the bench's own connection,
the reset and the seed, the item list). Each drains a queue it seeded and reads the
jobs back, so a rate never stands without the count that says each job ran once (a drain whose
jobs did not, or whose wait timed out, is flagged in bench.md and judged by no target:
pgkick_dev.bench.figures.unfinished):

- article_table: the article's naive claim beside pgkick's claim + complete, both as
  pgbench scripts (8 clients), each job's status and attempts read back;
- drain: pgkick's workers on the local stack, cold (new environments, start-up
  included) then warm, at each size, and the tuned configuration the peers run;
- scale: a claim + complete's cost on an empty table and beside `history` finished
  jobs (a long-lived table must not slow the claim: target within 1.5x).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pgkick_dev import queries as dev_queries
from pgkick_dev.bench import pgbench as bench_sql
from pgkick_dev.local.kicker import LocalKicker

if TYPE_CHECKING:
    from pgkick_dev.bench.runner import Bench

IDLE_SECONDS = 600.0  # a drain's environments kept warm until its kicker closes


def article_table(bench: Bench) -> dict[str, Any]:
    """The naive claim and pgkick's, `article_jobs` jobs over 8 pgbench clients each."""
    n, clients = bench.sizes.article_jobs, 8
    table = {}
    for name, script in (
        ("naive", bench_sql.naive()),
        ("pgkick", bench_sql.claim_and_complete_batch(1)),
    ):
        bench.reset()
        bench.seed(n, max_attempts=10)  # room for the naive claim's repeats (up to 8)
        run = bench_sql.pgbench(
            bench.bin_dir, bench.dsn, script, clients=clients, transactions=n // clients
        )
        table[name] = {"seconds": round(run.seconds, 2), **bench.counts()}
    return {"jobs": n, "clients": clients, **table}


def drain(bench: Bench, repeat: int) -> list[dict[str, Any]]:
    """Cold: 8 new local execution environments, start-up included; then the same number
    of jobs again while they are warm (as a peer's long-lived workers are). Then the
    tuned configuration (2 workers x batch 25) on the first size, as the peers run."""
    rows = []
    for n in bench.sizes.drains:
        rows += _drain(bench, n, bench.sizes.workers, 10)
    rows += _drain(bench, bench.sizes.drains[0], *bench.sizes.tuned)
    for row in rows:
        row["repeat"] = repeat
    return rows


def _drain(bench: Bench, n: int, workers: int, batch: int) -> list[dict[str, Any]]:
    kicker = LocalKicker(
        env={
            "DATABASE_URL": bench.dsn,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_MAX_FANOUT": "0",
            "PGKICK_BATCH": str(batch),
            "PGKICK_WORKER_LINGER_MS": "0",  # timed until idle: no idle tail in the rate
        },
        concurrency=workers,
        timeout_ms=900_000,
        # the environments outlive the reset and seed between the cold drain and the warm
        # one (about 2 s for 100,000 jobs, more under load; the default retires them at 5 s)
        idle_seconds=IDLE_SECONDS,
        output=bench.log,
    )
    rows = [{"start": "cold", **_drain_once(bench, kicker, n, workers, batch)}]
    rows.append({"start": "warm", **_drain_once(bench, kicker, n, workers, batch)})
    kicker.close()
    for row in rows:
        bench.say(f"drain: {row}")
    return rows


def _drain_once(
    bench: Bench, kicker: LocalKicker, n: int, workers: int, batch: int
) -> dict[str, Any]:
    bench.reset()
    bench.seed(n)
    before = sum(r.get("claimed", 0) for r in kicker.stats.results)
    cold_before = kicker.stats.cold_starts
    started = time.monotonic()
    for _ in range(workers):
        kicker.kick("default", "manual")
    idle = kicker.wait_idle(1_800)  # False: timed out, jobs may still be running
    seconds = time.monotonic() - started
    claimed = sum(r.get("claimed", 0) for r in kicker.stats.results) - before
    counts = bench.counts()
    return {
        "jobs": n,
        "workers": workers,
        "batch": batch,
        "seconds": round(seconds, 2),
        "jobs_per_s": round(n / seconds),
        "executions": claimed,
        "exactly_once": claimed == n and counts == {"done": {"count": n, "max_attempts": 1}},
        "timed_out": not idle,  # with exactly_once false: no target reads this rate
        "cold_starts": kicker.stats.cold_starts - cold_before,  # a warm drain's: none
        "worker_peak_rss_mb": kicker.stats.peak_rss_mb,  # the largest environment's
    }


def scale(bench: Bench) -> dict[str, Any]:
    """Milliseconds a claim + complete of 10 jobs, on an empty table and beside `history`
    finished rows, and their ratio."""
    costs = {}
    for label, history in (("empty", 0), ("history", bench.sizes.history)):
        bench.reset()
        with bench.store() as db:
            if history:
                db.execute(dev_queries.JOB_HISTORY_FILL, count=history)
            db.execute(dev_queries.JOB_TABLE_ANALYZE)
        bench.seed(bench.sizes.scale_jobs)
        with bench.store() as store:
            started = time.perf_counter()
            cycles = 0
            while jobs := store.claim("default", batch=10, lease=timedelta(minutes=5)):
                store.complete_many(jobs)
                cycles += 1
            costs[label] = round((time.perf_counter() - started) * 1000 / cycles, 3)
    ratio = costs["history"] / costs["empty"]  # unrounded: the 1.5x target reads it
    return {
        "history_rows": bench.sizes.history,
        "ms_per_claim_complete": costs,
        "ratio": ratio,
    }
