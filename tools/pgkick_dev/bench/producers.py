"""`pgkick bench`: issue 32's producer targets, and the single enqueue measured beside pgbench
over one stretch of time.

Why beside, chunk by chunk: one caller's single enqueue waits for a durable commit, so what
it costs is mostly the disk's flush, and on a shared machine that wait moves by a third
within minutes. Measured once each, two minutes apart (`single_none` and
`single_sql_ceiling` of the enqueue item), the ratio of the same code read 0.60 to 0.95 in
ten runs of an hour. Here `enqueue_and_kick` (none kicker, its connection warm) and pgbench's
same insert (one client, a commit each) take turns in chunks, the side that starts
alternating, so both are timed over the same stretch; pgbench's own rate leaves its process
start and connection out (they would weigh on a short chunk), as pgkick's warm pooled
connection is left out on its side.

The targets read the run's results: one caller against pgbench (>= 0.85x) and against the
fastest peer's single enqueue (>= 1x); enqueue_many against the fastest peer's bulk enqueue
(>= 2x); 16 producer threads against one (>= 4x). A peer's figures come from the peers' runs
of the same bench (`--peers`), each of its repeats and configurations; the fastest is taken.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.bench import pgbench as bench_sql
from pgkick_dev.bench.figures import spread

if TYPE_CHECKING:
    from pgkick_dev.bench.runner import Bench

CHUNKS = 8  # turns a side: with the bench's 2,000 singles, 250 calls a turn


def single_beside_pgbench(bench: Bench, chunks: int = CHUNKS) -> dict[str, Any]:
    """enqueue_and_kick and pgbench's same insert in alternate chunks: each side's rate over
    all its chunks, their ratio, and each pair of turns' ratio (the spread)."""
    bench.reset()
    size = max(1, bench.sizes.singles // chunks)
    script = bench_sql.insert_one()
    kicker = NoKicker()

    def pgkick_turn() -> float:
        started = time.perf_counter()
        for _ in range(size):
            producer.enqueue_and_kick({}, task="noop", dsn=bench.dsn, kicker=kicker)
        return time.perf_counter() - started

    def pgbench_turn() -> float:
        run = bench_sql.pgbench(bench.bin_dir, bench.dsn, script, clients=1, transactions=size)
        return size / run.rate

    pgkick_turn()  # the producer's pooled connection opened before the first timed turn
    spent: list[tuple[float, float]] = []
    for turn in range(chunks):
        if turn % 2 == 0:
            ours = pgkick_turn()
            theirs = pgbench_turn()
        else:
            theirs = pgbench_turn()
            ours = pgkick_turn()
        spent.append((ours, theirs))
    ours_total = sum(s[0] for s in spent)
    theirs_total = sum(s[1] for s in spent)
    pairs = [theirs / ours for ours, theirs in spent]
    return {
        "calls_per_turn": size,
        "turns": chunks,
        "pgkick_jobs_per_s": round(size * chunks / ours_total),
        "pgbench_jobs_per_s": round(size * chunks / theirs_total),
        "ratio": round(theirs_total / ours_total, 3),
        "pairs": [round(p, 3) for p in pairs],
        "pairs_spread": spread(pairs),
    }


def targets(results: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """The producer targets of issue 32, from this run's results."""
    enqueue = results.get("enqueue", {})
    beside = enqueue.get("single_beside_pgbench")
    peers = results.get("peers", [])
    rows: list[tuple[str, Any, bool]] = []
    label = "single enqueue_and_kick >= 0.85x pgbench's same insert (1 caller, turns alternated)"
    if beside is None:
        rows.append((label, "not measured (item enqueue)", False))
    else:
        low, high = beside["pairs_spread"]["min"], beside["pairs_spread"]["max"]
        measured = (
            f"{beside['ratio']:.2f}x ({beside['pgkick_jobs_per_s']:,} vs "
            f"{beside['pgbench_jobs_per_s']:,} jobs/s; turns {low:.2f}x..{high:.2f}x)"
        )
        rows.append((label, measured, beside["ratio"] >= 0.85))
    single = enqueue.get("single_none", {}).get("jobs_per_s")
    rows.append(
        _versus_best_peer(
            "single enqueue_and_kick (none) >= the fastest peer's single enqueue",
            single,
            peers,
            "single_enqueue_jobs_per_s",
            1.0,
        )
    )
    rows.append(
        _versus_best_peer(
            "enqueue_many >= 2x the fastest peer's bulk enqueue",
            enqueue.get("many", {}).get("jobs_per_s"),
            peers,
            "bulk_enqueue_jobs_per_s",
            2.0,
        )
    )
    threads = results.get("producer_threads", [])
    rows += [threads_target(threads, 8, 3), threads_target(threads, 16, 4)]
    return rows


def _versus_best_peer(
    label: str, ours: float | None, peers: list[dict[str, Any]], key: str, at_least: float
) -> tuple[str, Any, bool]:
    best = max(peers, key=lambda row: row.get(key) or 0, default=None)
    if ours is None:
        return (label, "not measured (item enqueue)", False)
    if best is None or not best.get(key):
        return (label, "peers not run (--peers)", False)
    ratio = ours / best[key]
    measured = f"{ratio:.2f}x ({ours:,} vs {best['peer']}'s {best[key]:,} jobs/s)"
    return (label, measured, ratio >= at_least)


def threads_target(
    rows: list[dict[str, Any]], threads: int, at_least: float
) -> tuple[str, Any, bool]:
    """Single enqueues from `threads` threads of one process against one thread (durable
    commits), every job once, no more sessions than threads."""
    label = (
        f"{threads} producer threads >= {at_least:g}x one thread's rate, sessions opened <= threads"
    )
    by = {row["threads"]: row for row in rows}
    if 1 not in by or threads not in by:
        return (label, "not measured (item producer_threads)", False)
    one, many = by[1], by[threads]
    ratio = round(many["jobs_per_s"] / max(one["jobs_per_s"], 1), 2)
    sessions_ok = all(row["sessions_opened"] <= row["threads"] for row in rows)
    measured = (
        f"{ratio}x ({many['jobs_per_s']:,} vs {one['jobs_per_s']:,} jobs/s); sessions "
        + ", ".join(f"{row['sessions_opened']} for {row['threads']}" for row in rows)
    )
    ok = ratio >= at_least and sessions_ok and all(row["exactly_once"] for row in rows)
    return (label, measured, ok)
