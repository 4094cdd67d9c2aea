"""`pgkick bench` item `dependencies`: what a chain and a fan-out/fan-in cost (issue 34.5).

Why: a dependant is released by its last parent's completion, in the database, and
kicked by the worker that wrote it; no process polls. The figures that prove it are
the invocations, database sessions and statements each job costs, and the time from
the last parent's finish to the dependant's claim (target p50 <= 50 ms, warm). Both
shapes run on the dev stack's local Lambda (LocalKicker, the real handler), after a
first, uncounted run of the same shape so the environments are warm:

- a chain of `steps` `noop` jobs, each `after=` the one before, enqueued in one
  transaction and kicked once; `chains` of them one after another; once in one queue
  (the worker that completes a step claims the next in the same round trip) and once
  alternating two queues (each release is a kick and a new invocation);
- a `bench_fan_out` job (pgkick_dev.tasks) spawning `fan_out` children and a join
  after them all, which checks it received every child's result; `fan_outs` of them.

Statements are pg_stat_statements' calls when the server preloads it (the bench's own
server does), else transactions (pg_stat_database); both include the producer's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgkick.connections import linger
from pgkick.connections.db import Database, opened
from pgkick.producer import enqueue as producer
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.figures import percentile
from pgkick_dev.local.kicker import LocalKicker
from pgkick_dev.sessions import SessionCounter

TARGET_P50_MS = 50


def _chain(dsn: str, steps: int, kicker: LocalKicker, queues: int = 1) -> None:
    """`steps` jobs, each after the one before, committed together, then kicked once;
    step i in queue `chain-{i % queues}`: with 2, every release is a kick to the other
    queue (a new invocation), with 1 the releasing worker claims the next step itself."""
    with Database.open(dsn, autocommit=False, application_name="pgkick-bench") as app:
        with producer.transaction(app.conn, kicker=kicker) as jobs:
            previous = jobs.enqueue({"step": 0}, task="noop", queue="chain-0")
            for step in range(1, steps):
                queue = f"chain-{step % queues}"
                previous = jobs.enqueue({"step": step}, task="noop", queue=queue, after=[previous])


def _fan_out(dsn: str, children: int, kicker: LocalKicker) -> None:
    producer.enqueue_and_kick({"n": children}, task="bench_fan_out", dsn=dsn, kicker=kicker)


SHAPES: dict[str, Callable[[str, int, LocalKicker], None]] = {
    "chain, one queue": _chain,
    "chain, two queues": lambda dsn, steps, kicker: _chain(dsn, steps, kicker, queues=2),
    "fan-out and join": _fan_out,
}


class _Counts:
    """Statements (or transactions) and sessions in the database from here to `read()`."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        with Database.open(dsn, application_name="pgkick-bench") as db:
            self.statements = bool(db.one(dev_queries.STATEMENT_STATS_LOADED)[0])
            if self.statements:
                db.execute(dev_queries.STATEMENT_STATS_INSTALL)
        self._before = self._total()
        self._sessions, self._ours = SessionCounter(dsn), opened.count

    def _total(self) -> int:
        query = (
            dev_queries.STATEMENT_CALL_TOTAL if self.statements else dev_queries.TRANSACTION_TOTAL
        )
        with Database.open(self.dsn, application_name="pgkick-bench") as db:
            return int(db.one(query)[0])

    def read(self) -> tuple[int, int]:
        """(worker sessions, statements or transactions), once every session has ended."""
        sessions = self._sessions.opened() - (opened.count - self._ours)
        return sessions, self._total() - self._before


def measure(
    dsn: str,
    shape: str,
    runs: int,
    size: int,
    log: Path,
    reset: Callable[[], None],
    concurrency: int = 4,
) -> dict[str, Any]:
    """`runs` chains of `size` steps or fan-outs of `size` children (SHAPES), one after
    another on environments a first, uncounted run warmed; counted and timed."""
    reset()
    kicker = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_TASKS": "pgkick_dev.tasks",
        },
        concurrency=concurrency,
        timeout_ms=900_000,
        output=log,
    )
    try:
        SHAPES[shape](dsn, min(size, 10), kicker)  # warms the environments it will use
        kicker.wait_idle(120)
        reset()
        before = kicker.stats.invocations
        linger.close_all()
        counts = _Counts(dsn)
        started = time.monotonic()
        for _ in range(runs):
            SHAPES[shape](dsn, size, kicker)
            kicker.wait_idle(600)
        seconds = time.monotonic() - started
        invocations = kicker.stats.invocations - before
    finally:
        kicker.close()
    linger.close_all()
    sessions, statements = counts.read()
    with Database.open(dsn, application_name="pgkick-bench") as db:
        waits = db.dicts(dev_queries.JOB_DEPENDANT_START_WAIT)
        spawned = [float(row[0]) for row in db.rows(dev_queries.JOB_SPAWNED_START_WAIT)]
        statuses = {s: n for s, n, _ in db.rows(dev_queries.JOB_COUNT_BY_STATUS)}
    jobs = sum(statuses.values())
    fan = shape == "fan-out and join"
    expected = runs * (size + 2 if fan else size)
    # a chain's steps and a fan-out's join wait on a finished parent; a child's wait is
    # its place in the 1,000-job backlog the fan-out made, reported apart: from its row's
    # creation, which is its spawner's completion (pgkick.worker.spawn writes it there)
    released = [float(w["wait_ms"]) for w in waits if w["task"] != "bench_fan_child"]
    children = spawned
    row: dict[str, Any] = {
        "shape": f"{size:,}-way fan-out and join" if fan else f"{size}-step {shape}",
        "runs": runs,
        "jobs": jobs,
        "seconds": round(seconds, 2),
        "all_done": statuses == {"done": expected},
        "invocations": invocations,
        "invocations_per_job": round(invocations / max(jobs, 1), 4),
        "worker_sessions": sessions,
        "worker_sessions_per_job": round(sessions / max(jobs, 1), 4),
        "counted": "statements" if counts.statements else "transactions",
        "statements_per_job": round(statements / max(jobs, 1), 2),
        "release_samples": len(released),
        "release_to_start_p50_ms": percentile(released, 0.5),
        "release_to_start_p99_ms": percentile(released, 0.99),
        "release_to_start_max_ms": round(max(released, default=0.0), 2),
    }
    if children:
        row["child_start_after_spawner_p50_ms"] = percentile(children, 0.5)
        row["child_start_after_spawner_p99_ms"] = percentile(children, 0.99)
    return row


def run(
    dsn: str,
    *,
    chain: tuple[int, int],
    fan_out: tuple[int, int],
    log: Path,
    reset: Callable[[], None],
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """chain: (chains, steps), each run in one queue and across two; fan_out: (fan-outs,
    children)."""
    rows = []
    for shape in SHAPES:
        runs, size = fan_out if shape == "fan-out and join" else chain
        rows.append(measure(dsn, shape, runs, size, log, reset))
        say(f"dependencies: {rows[-1]}")
    return rows


def target(rows: list[dict[str, Any]]) -> tuple[str, Any, bool]:
    """Issue 34's target: the release-to-start p50 of every shape within 50 ms."""
    p50s = {row["shape"]: row["release_to_start_p50_ms"] for row in rows}
    met = bool(rows) and all(row["all_done"] for row in rows)
    met = met and all(p50 <= TARGET_P50_MS for p50 in p50s.values())
    return (
        f"dependant start after its last parent's finish, p50 <= {TARGET_P50_MS} ms "
        "(warm; chains in one queue and across two, fan-in)",
        "; ".join(f"{shape} {p50} ms" for shape, p50 in p50s.items()) if rows else None,
        met,
    )


def cost_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """bench.md's Cost rows: each shape's invocations, sessions and statements per job."""
    if not rows:
        return [["dependencies: cost per job", "not measured (item dependencies)"]]
    return [
        [
            f"dependencies, {row['shape']} (x{row['runs']})",
            f"{row['invocations_per_job']} invocations, {row['worker_sessions_per_job']} "
            f"sessions, {row['statements_per_job']} {row['counted']} per job "
            f"({row['jobs']:,} jobs); release to start p50 {row['release_to_start_p50_ms']} "
            f"/ p99 {row['release_to_start_p99_ms']} ms ({row['release_samples']} samples)",
        ]
        for row in rows
    ]
