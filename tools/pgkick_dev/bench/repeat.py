"""`pgkick bench --repeat N`: the compared items run N times, interleaved, and read pair by pair.

Why: on a shared machine one measurement of each side, minutes apart, does not
hold (a ceiling measured during a burst of other load came out below the drain
it bounds). So each repeat runs every side once, one after the other (the
pipelined SQL ceiling, pgkick's drains, the peers' drains), and a ratio is
taken within a repeat, where drift hits both sides alike. Each figure and each
ratio is reported as the median and the spread (min..max) over the repeats.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pgkick_dev import queries as dev_queries
from pgkick_dev.bench import pgbench as bench_sql

if TYPE_CHECKING:
    from pgkick_dev.bench.runner import Bench

REPEATED = ("sql_ceiling", "drain", "peers")


def run(bench: Bench, items: Iterable[str], repeat: int) -> None:
    """Each repeat: the ceiling, then pgkick's drains, then the peers' drains. Then, once,
    what is not a rate (the statements each system runs while idle)."""
    chosen = [item for item in REPEATED if item in set(items)]
    for index in range(repeat):
        bench.say(f"repeat {index + 1} of {repeat}: {', '.join(chosen)}")
        for item in chosen:
            if item == "sql_ceiling":
                ceiling(bench, index)
            elif item == "drain":
                bench.drain(index)
            else:
                peer_drains(bench, index)
    if "peers" in chosen:
        idle_statements(bench)


def configurations(bench: Bench) -> list[tuple[int, int, int]]:
    """(clients, batch, jobs) of each drain the ceiling bounds: the drain's, the tuned one."""
    sizes = bench.sizes
    workers, batch = sizes.tuned
    return [(sizes.workers, 10, sizes.drains[-1]), (workers, batch, sizes.drains[0])]


def ceiling(bench: Bench, index: int) -> None:
    """pgbench doing per round trip what a worker does, with each drain's clients and batch.

    Clients do not progress evenly, and one that ran out of rounds would strand the batch
    it holds; so each may do every round the queue needs (plus the one that completes the
    last batch), and the time is taken on the server from the first claim to the last
    finish: neither pgbench's connecting (the ceiling is warm) nor its rounds on an empty
    queue afterwards are counted."""
    for clients, batch, jobs in configurations(bench):
        bench.reset()
        bench.seed(jobs)
        run = bench_sql.pgbench(
            bench.bin_dir,
            bench.dsn,
            bench_sql.complete_then_claim(batch),
            clients=clients,
            transactions=-(-jobs // batch) + 2,
            mode="extended",  # as the worker: planned on every run
            define={"ids": "{}", "attempts": "{}"},
        )
        with bench.store() as db:
            done, seconds = db.one(dev_queries.JOB_DONE_SPAN)
        row = {
            "repeat": index,
            "clients": clients,
            "batch": batch,
            "jobs": jobs,
            "done": done,
            "seconds": round(seconds, 3),
            "pgbench_seconds": round(run.seconds, 2),
            "jobs_per_s": round(done / seconds) if seconds > 0 else 0,
        }
        bench.results.setdefault("ceiling", []).append(row)
        bench.say(f"pipelined SQL ceiling: {row}")


def peer_drains(bench: Bench, index: int) -> None:
    """pgqueuer and procrastinate on the drain's first size: as pgkick runs (8 processes,
    batch 10), pgqueuer also tuned (2 processes, batch 25), procrastinate a job at a time."""
    from pgkick_dev.bench import peers as bench_peers

    n, workers = bench.sizes.drains[0], bench.sizes.workers
    runs = (
        ("pgqueuer", workers, 10),
        ("pgqueuer", *bench.sizes.tuned),
        ("procrastinate", workers, 1),
    )
    for peer, processes, batch in runs:
        row = bench_peers.drain(
            bench.dsn,
            peer,
            n,
            processes=processes,
            batch=batch,
            singles=bench.sizes.singles,
            log=bench.log,
        )
        bench.results.setdefault("peers", []).append({"repeat": index, **row})
        bench.say(f"peer: {bench.results['peers'][-1]}")


def idle_statements(bench: Bench) -> None:
    """Statements a minute while one worker of each system waits on an empty queue (once:
    a count, not a rate that drifts with the machine's load)."""
    from pgkick_dev.bench import peers as bench_peers

    idle = {
        name: bench_peers.idle_statements_per_minute(
            bench.dsn, peer, bench.sizes.idle_seconds, bench.log
        )
        for name, peer in (("pgkick", None), *((p, p) for p in bench_peers.PEERS))
    }
    bench.results["idle_statements_per_minute"] = idle
    bench.say(f"idle statements a minute: {idle}")
