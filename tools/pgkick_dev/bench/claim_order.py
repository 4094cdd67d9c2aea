"""`pgkick bench` item claim_order: the claim's cost with priorities and groups at a backlog,
against the claim as it was before migration 0004, in the same run on the same server.

Why a second schema: "today's claim" means today's statement on today's table and
indexes (run_at order, one ready index, no group or running indexes to maintain).
The bench builds that table in the schema pgkick_before_groups from migrations
0001-0003 and runs the old statement there (a session search_path), then the current claim
(`WorkerStore.claim`, as the worker sends it: one call of the server-side job_claim,
migration 0007, which takes the queue's claim lock only for a queue with a limit or
grouped jobs) on the current table with the same backlog: plain, with priorities
spread over -5..5, and with priorities and half the jobs in interleaved groups
(1,000 groups, so a batch of 10 finds 10 heads among its first candidates); and (issue 33)
every job keyed over 1,000 keys in a queue with a rate per key and a concurrency of 2 per
key (the round-robin claim of migration 0014), reported against the plain claim
(`keyed_vs_plain`, target <= 1.3). That pair is measured side by side in one table: the
keyed backlog in queue default and a plain backlog of the same size in queue plain, their
cycles interleaved in chunks of `chunk` (each side timed over the same stretch of the shared
machine's load; a variant run after another, two seconds apart, saw ratios from x0.4 to
x4.0 within one run there), the ratio taken over each round's chunks.

Each figure is ms per claim-of-10 + complete, one connection, `cycles` cycles,
so the backlog stays within 20% of its size throughout. `rounds` rounds run every
variant in turn; a ratio is taken within a round (drift on the shared machine hits
both sides alike) and reported as the median of the rounds and their spread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from pgkick.store import flow, migration_scripts
from pgkick.store.operator import OperatorStore
from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.figures import spread

LEASE = timedelta(minutes=5)
# All but 0004 (priorities, groups), 0006 (the move) and the claim's functions (0007, 0008);
# 0010 for the completion both sides send (job_complete_many calls its job_complete).
BEFORE_VERSIONS = (1, 2, 3, 5, 10)
BEFORE = "pgkick_before_groups"  # the schema of the table as it was before 0004
BESIDE = "plain"  # the queue of the plain backlog measured beside the keyed one


def _before_schema(dsn: str) -> None:
    """A fresh schema pgkick_before_groups holding the jobs table as it was before 0004
    (0005's result and cancel columns added, and 0010's job_complete: the completion, not
    measured apart, writes them)."""
    with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
        db.execute(dev_queries.BENCH_SCHEMA_DROP)
        db.execute(dev_queries.BENCH_SCHEMA_CREATE)
        db.execute(dev_queries.BENCH_SEARCH_PATH_SET)
        for version, _, script in migration_scripts.MIGRATIONS:
            if version in BEFORE_VERSIONS:
                db.execute(script)  # bundled migration text


def _cycle_cost(store: WorkerStore, claim: Callable[[], list[Any]], cycles: int) -> float:
    started = time.perf_counter()
    for _ in range(cycles):
        jobs = claim()
        assert len(jobs) == 10, "the backlog ran out: raise its size or lower cycles"
        store.complete_many(jobs)
    return (time.perf_counter() - started) * 1000 / cycles


def _fill_current(dsn: str, backlog: int, priorities: bool, groups: int) -> None:
    with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
        db.execute(dev_queries.JOB_TRUNCATE_ALL)
        db.execute(
            dev_queries.JOB_BACKLOG_FILL,
            queue=None,
            count=backlog,
            priorities=priorities,
            groups=groups,
        )
        db.execute(dev_queries.JOB_TABLE_ANALYZE)


def _current(dsn: str, backlog: int, cycles: int, priorities: bool, groups: int) -> float:
    _fill_current(dsn, backlog, priorities, groups)
    with WorkerStore.open(dsn, application_name="pgkick-bench") as store:
        return _cycle_cost(store, lambda: store.claim("default", batch=10, lease=LEASE), cycles)


def _keyed_beside_plain(
    dsn: str, backlog: int, cycles: int, keys: int, chunk: int
) -> tuple[float, float]:
    """The claim of a queue with a rate per key and a concurrency per key (0014's round
    robin), and the plain claim beside it: ms per cycle of each, (keyed, plain), their cycles
    interleaved chunk by chunk on one connection. The rate is far above what the cycles
    start, so every claim takes 10, as the plain one does; what is measured is the rule's
    cost, not its holding back."""
    with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
        db.execute(dev_queries.JOB_TRUNCATE_ALL)
        db.execute(dev_queries.JOB_BACKLOG_FILL_KEYED, count=backlog, keys=keys)
        db.execute(
            dev_queries.JOB_BACKLOG_FILL, queue=BESIDE, count=backlog, priorities=False, groups=0
        )
        db.execute(dev_queries.JOB_TABLE_ANALYZE)
    with OperatorStore.open(dsn, application_name="pgkick-bench") as operator:
        flow.set_queue_rate(operator, "default", 1_000_000, timedelta(days=1))
        flow.set_queue_concurrency(operator, "default", 2)
    spent = {"default": 0.0, BESIDE: 0.0}
    try:
        with WorkerStore.open(dsn, application_name="pgkick-bench") as store:
            for n, start in enumerate(range(0, cycles, chunk)):
                size = min(chunk, cycles - start)
                for queue in ("default", BESIDE) if n % 2 == 0 else (BESIDE, "default"):
                    claim = partial(store.claim, queue, batch=10, lease=LEASE)
                    spent[queue] += size * _cycle_cost(store, claim, size)
    finally:
        with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
            db.execute(dev_queries.QUEUE_LIMITS_CLEAR_ALL)
    return spent["default"] / cycles, spent[BESIDE] / cycles


def _before(dsn: str, backlog: int, cycles: int) -> float:
    # Every statement, the completions too, rewritten for that schema (pgkick.connections.qualify).
    with WorkerStore.open(dsn, schema=BEFORE, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
        store.execute(dev_queries.JOB_BACKLOG_FILL_BEFORE_GROUPS, count=backlog)
        store.execute(dev_queries.JOB_TABLE_ANALYZE)

        def claim() -> list[Any]:
            rows = store.rows(
                dev_queries.JOB_CLAIM_BEFORE_GROUPS, queue="default", batch=10, lease=LEASE
            )
            return [ClaimedJob(*row) for row in rows]

        return _cycle_cost(store, claim, cycles)


def run(
    dsn: str,
    *,
    backlog: int = 100_000,
    cycles: int = 2_000,
    rounds: int = 5,
    keys: int = 1_000,
    chunk: int = 50,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """ms per claim + complete for each variant, and each variant's ratio to the claim before
    0004: medians of the rounds, with every round's figures; and the keyed claim's ratio to
    the plain claim measured beside it."""
    _before_schema(dsn)
    measured: dict[str, list[float]] = {}
    beside: list[float] = []  # the plain claim's ms, measured beside the keyed one

    def keyed() -> float:
        keyed_ms, plain_ms = _keyed_beside_plain(dsn, backlog, cycles, keys, chunk)
        beside.append(round(plain_ms, 3))
        return keyed_ms

    variants: dict[str, Callable[[], float]] = {
        "before_0004": lambda: _before(dsn, backlog, cycles),
        "plain": lambda: _current(dsn, backlog, cycles, False, 0),
        "priorities": lambda: _current(dsn, backlog, cycles, True, 0),
        "priorities_and_groups": lambda: _current(dsn, backlog, cycles, True, 1_000),
        "rate_and_concurrency_per_key": keyed,
    }
    try:
        for _ in range(rounds):
            for name, measure in variants.items():
                measured.setdefault(name, []).append(round(measure(), 3))
    finally:
        with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
            db.execute(dev_queries.BENCH_SCHEMA_DROP)
            db.execute(dev_queries.JOB_TRUNCATE_ALL)
    base = measured["before_0004"]
    ratios = {
        name: [round(v / b, 2) for v, b in zip(values, base, strict=True)]
        for name, values in measured.items()
        if name != "before_0004"
    }
    keyed_ratios = [
        round(k / p, 2)
        for k, p in zip(measured["rate_and_concurrency_per_key"], beside, strict=True)
    ]
    result = {
        "backlog": backlog,
        "keys": keys,
        # issue 33's target: the claim with a rate and a concurrency per key <= 1.3x plain,
        # the plain claim measured beside it (same table, chunks of `chunk` interleaved)
        "keyed_vs_plain": spread(keyed_ratios)["median"],
        "spread_keyed_vs_plain": spread(keyed_ratios),
        "plain_beside_keyed_ms": spread(beside),
        "chunk": chunk,
        "cycles": cycles,
        "rounds": rounds,
        "ms_per_claim_complete": {k: spread(v)["median"] for k, v in measured.items()},
        "ratio": {k: spread(v)["median"] for k, v in ratios.items()},
        "spread_ms": {k: spread(v) for k, v in measured.items()},
        "spread_ratio": {k: spread(v) for k, v in ratios.items()},
    }
    say(f"claim_order: {result}")
    return result
