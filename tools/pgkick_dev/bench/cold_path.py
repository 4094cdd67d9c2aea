"""`pgkick bench` item `cold_path`: commit-to-claim when the kick starts a NEW environment.

Why: no peer publishes commit-to-start with a cold function, yet it is the figure a
serverless user lives with (issue 32). Each sample is a fresh local stack (the
stand-in the bench already uses: AWS's emulator running Lambda's runtime client, a
new process per environment), so the kick's invocation pays all of it: process start,
imports, settings, connect, claim. Beside it, interleaved sample by sample so the
machine's drift falls on both, the floor: the same producer and stack with a handler
that only imports psycopg and connects (pgkick_dev.bench.floor_handler). Target: the
p50 within 1.2x the floor's. The dev stack passes DATABASE_URL, so the secret read a
deployed worker makes at its cold start (one GetSecretValue) is not in either figure.

Also reported, with no floor beside it: commit to the job's finish (a task that does
nothing, so its start), what the user waits for. Between claim and start a cold start's
first batch waits for its rescue's booking (pgkick.worker.rescue), which the claim alone
would hide.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgkick.connections.db import Database
from pgkick.producer import enqueue as producer
from pgkick.store.maintenance import MaintenanceStore
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.figures import percentile, shown, spread
from pgkick_dev.local.kicker import LocalKicker

FLOOR = "pgkick_dev.bench.floor_handler:handler"
WORKER = "pgkick.aws.worker:handler"
TARGET = 1.2


def one(dsn: str, handler: str, log: Path) -> tuple[float, float | None]:
    """One job committed and kicked at a stack with no environment: ms from its commit to
    its claim (the worker) or to the connection (the floor), and to its finish (the worker's
    only; None for the floor, which runs no job)."""
    with Database.open(dsn, application_name="pgkick-bench") as db:
        db.execute(dev_queries.JOB_TRUNCATE_ALL)
        db.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    local = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_WORKER_LINGER_MS": "0",
        },
        concurrency=1,
        output=log,
        handler=handler,
    )
    try:
        job = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=local)
        local.wait_idle(120)
        if local.stats.cold_starts != 1 or local.stats.invocations != 1:
            raise AssertionError(f"not one cold invocation: {local.stats}")
        answer = local.stats.results[-1]
    finally:
        local.close()
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        (row,) = store.get_many([job])
    committed = float(row["created_at"].timestamp())
    if handler == FLOOR:
        return round((float(answer["connected_at"]) - committed) * 1000, 2), None
    claimed = round((float(row["claimed_at"].timestamp()) - committed) * 1000, 2)
    return claimed, round((float(row["finished_at"].timestamp()) - committed) * 1000, 2)


def run(dsn: str, samples: int, log: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """`samples` cold starts of each, in turns (worker, floor, worker, floor, ...)."""
    worker: list[float] = []
    done: list[float] = []  # the worker's commit to the job's finish
    floor: list[float] = []
    for _ in range(samples):
        claimed, finished = one(dsn, WORKER, log)
        assert finished is not None  # the worker's sample always ran its job
        worker.append(claimed)
        done.append(finished)
        floor.append(one(dsn, FLOOR, log)[0])
    pairs = [w / f for w, f in zip(worker, floor, strict=True) if f > 0]
    result: dict[str, Any] = {
        "samples": samples,
        "worker_ms": {
            "p50": percentile(worker, 0.5),
            "p99": percentile(worker, 0.99),
            **spread(worker),
        },
        "worker_done_ms": {
            "p50": percentile(done, 0.5),
            "p99": percentile(done, 0.99),
            **spread(done),
        },
        "floor_ms": {
            "p50": percentile(floor, 0.5),
            "p99": percentile(floor, 0.99),
            **spread(floor),
        },
        # unrounded: the target reads the p50's (1.204 rounded to 1.2 met a "<= 1.2")
        "ratio_p50": percentile(worker, 0.5) / max(percentile(floor, 0.5), 0.01),
        "ratio_p99": percentile(worker, 0.99) / max(percentile(floor, 0.99), 0.01),
        "ratio_pairs": spread([round(p, 2) for p in pairs]),
    }
    say(
        f"cold path: worker p50 {result['worker_ms']['p50']} ms, p99 {result['worker_ms']['p99']}"
        f" ms; floor p50 {result['floor_ms']['p50']} ms, p99 {result['floor_ms']['p99']} ms; "
        f"x{result['ratio_p50']:.2f} (p50), x{result['ratio_p99']:.2f} (p99); the worker's "
        f"commit to the job's finish p50 {result['worker_done_ms']['p50']} ms"
    )
    return result


def target(cold: dict[str, Any] | None) -> tuple[str, Any, bool]:
    label = (
        f"cold path: commit-to-claim on a new environment p50 <= {TARGET}x the floor's "
        "(import psycopg + connect, same runtime)"
    )
    if not cold:
        return (label, "not measured (item cold_path)", False)
    pairs = cold["ratio_pairs"]
    measured = (
        f"x{shown(cold['ratio_p50'], TARGET, 2)} (worker p50 {cold['worker_ms']['p50']} ms vs "
        f"floor {cold['floor_ms']['p50']} ms; p99 x{cold['ratio_p99']:.2f}; pairs "
        f"x{pairs['min']}..x{pairs['max']}, {cold['samples']} each)"
    )
    return (label, measured, cold["ratio_p50"] <= TARGET)
