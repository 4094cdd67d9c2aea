"""`pgkick bench`: issue 32's producer targets, and the single enqueue measured beside
pgbench's same insert and the peers' single enqueues over one stretch of time.

Why in turns: one caller's single enqueue waits for a durable commit, so what it costs is
mostly the disk's flush, and on a shared machine that wait moves by a third within
minutes. Measured once each, minutes apart (`single_none`, `single_sql_ceiling` and the
peers' runs), the ratio to pgbench of the same code read 0.60 to 0.95 in ten runs of an
hour. Here `enqueue_and_kick` (none kicker), pgbench's same insert (one client, a commit
each) and, with `--peers`, each peer's single enqueue through its own API take turns, each
round starting with the next side, so all are timed over the same stretch. Each side's
connection is warm before its first turn (pgbench's rate is its own, its process start
and connecting left out: they would weigh a tenth on a turn of 250).

The targets read the run's results: one caller against pgbench (>= 0.85x) and against the
fastest peer's single enqueue in the same turns (>= 1x); enqueue_many against the fastest
peer's bulk enqueue of the peers' runs, any repeat or configuration (>= 2x); 8 and 16
producer threads against one (>= 3x, >= 4x).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.bench import peer_apis
from pgkick_dev.bench import pgbench as bench_sql
from pgkick_dev.bench.figures import shown, spread
from pgkick_dev.bench.peers import VERSIONS

if TYPE_CHECKING:
    from pgkick_dev.bench.runner import Bench

CHUNKS = 8  # turns a side: with the bench's 2,000 singles, 250 calls a turn


def single_beside_pgbench(bench: Bench, chunks: int = CHUNKS) -> dict[str, Any]:
    """enqueue_and_kick, pgbench's same insert and (with --peers) each peer's single enqueue
    through its own API, in turns: each side's rate over all its turns, pgkick's ratio to
    each, and each round of turns' ratio (the spread)."""
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

    sides: dict[str, Callable[[], float]] = {"pgkick": pgkick_turn, "pgbench": pgbench_turn}
    peers: dict[str, peer_apis.SingleTurns] = {}
    try:  # the peers' connections and event loops closed whatever fails
        for name in bench.item_peers:
            peers[VERSIONS[name]] = peer_apis.SingleTurns(name, bench.dsn)
        sides |= {name: partial(peer.turn, size) for name, peer in peers.items()}
        pgkick_turn()  # the producer's pooled connection opened before the first timed turn
        spent: dict[str, list[float]] = {name: [] for name in sides}
        order = list(sides)
        for turn in range(chunks):  # each round starts with the next side
            for name in order[turn % len(order) :] + order[: turn % len(order)]:
                spent[name].append(sides[name]())
    finally:
        for peer in peers.values():
            peer.close()
    pgbench = _versus(spent, "pgbench", size)
    return {
        "calls_per_turn": size,
        "turns": chunks,
        "pgkick_jobs_per_s": round(size * chunks / sum(spent["pgkick"])),
        "pgbench_jobs_per_s": pgbench.pop("jobs_per_s"),
        **pgbench,
        "peers": {name: _versus(spent, name, size) for name in peers},
    }


def _versus(spent: dict[str, list[float]], other: str, size: int) -> dict[str, Any]:
    """`other`'s rate over all its turns, pgkick's ratio to it (time over the same
    turns), and round by round."""
    ours, theirs = spent["pgkick"], spent[other]
    pairs = [t / o for o, t in zip(ours, theirs, strict=True)]
    return {
        "jobs_per_s": round(size * len(theirs) / sum(theirs)),
        "ratio": sum(theirs) / sum(ours),  # unrounded: the targets read it
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
            f"{shown(beside['ratio'], 0.85, 2)}x ({beside['pgkick_jobs_per_s']:,} vs "
            f"{beside['pgbench_jobs_per_s']:,} jobs/s; turns {low:.2f}x..{high:.2f}x)"
        )
        rows.append((label, measured, beside["ratio"] >= 0.85))
    rows.append(_single_versus_peers(beside))
    rows.append(_many_versus_peers(enqueue.get("many", {}).get("jobs_per_s"), peers))
    threads = results.get("producer_threads", [])
    rows += [threads_target(threads, 8, 3), threads_target(threads, 16, 4)]
    return rows


def _single_versus_peers(beside: dict[str, Any] | None) -> tuple[str, Any, bool]:
    """pgkick's single enqueue over the fastest peer's, both timed in the same turns."""
    label = "single enqueue_and_kick (none) >= the fastest peer's single enqueue, turns alternated"
    if beside is None:
        return (label, "not measured (item enqueue)", False)
    peers = beside.get("peers") or {}
    if not peers:
        return (label, "peers not run (--peers)", False)
    name, peer = max(peers.items(), key=lambda item: item[1]["jobs_per_s"])
    low, high = peer["pairs_spread"]["min"], peer["pairs_spread"]["max"]
    measured = (
        f"{shown(peer['ratio'], 1.0, 2)}x ({beside['pgkick_jobs_per_s']:,} vs {name}'s "
        f"{peer['jobs_per_s']:,} jobs/s; turns {low:.2f}x..{high:.2f}x)"
    )
    return (label, measured, peer["ratio"] >= 1.0)


def _many_versus_peers(ours: float | None, peers: list[dict[str, Any]]) -> tuple[str, Any, bool]:
    """enqueue_many over the fastest peer's bulk enqueue, each from its own run (--peers)."""
    label = "enqueue_many >= 2x the fastest peer's bulk enqueue"
    rates = [(row.get("bulk_enqueue_jobs_per_s") or 0, row["peer"]) for row in peers]
    if ours is None:
        return (label, "not measured (item enqueue)", False)
    theirs, name = max(rates, default=(0, ""))  # any repeat or configuration of any peer
    if not theirs:
        return (label, "peers not run (--peers)", False)
    ratio = ours / theirs
    measured = f"{shown(ratio, 2.0, 2)}x ({ours:,} vs {name}'s {theirs:,} jobs/s)"
    return (label, measured, ratio >= 2.0)


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
    ratio = many["jobs_per_s"] / max(one["jobs_per_s"], 1)  # judged unrounded
    sessions_ok = all(row["sessions_opened"] <= row["threads"] for row in rows)
    measured = (
        f"{shown(ratio, at_least, 2)}x ({many['jobs_per_s']:,} vs {one['jobs_per_s']:,} "
        "jobs/s); sessions "
        + ", ".join(f"{row['sessions_opened']} for {row['threads']}" for row in rows)
    )
    ok = ratio >= at_least and sessions_ok and all(row["exactly_once"] for row in rows)
    return (label, measured, ok)
