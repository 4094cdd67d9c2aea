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
(`keyed_vs_plain`, target <= 1.3).

Every ratio is taken between two claims timed side by side: each variant beside the claim
before 0004 (both backlogs filled, one connection each), the keyed claim beside a plain
backlog of the same size in another queue of its table; their cycles interleaved in chunks
of `chunk`, so each side is timed over the same stretch of the shared machine's load. Timed
one after the other, seconds apart, the same code's ratio to before 0004 read x1.09 to
x1.26 over five rounds (x1.12 to x1.17 interleaved), and a keyed variant x0.4 to x4.0.

Each figure is ms per claim-of-10 + complete, one connection, `cycles` cycles,
so the backlog stays within 20% of its size throughout. `rounds` rounds run every
pair in turn; a ratio is taken within a pair (from the unrounded ms) and reported as the
median of the rounds, unrounded (the targets read it), and their spread.
"""

from __future__ import annotations

import statistics
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


type Side = tuple[WorkerStore, Callable[[], list[Any]]]


def _interleaved(first: Side, second: Side, cycles: int, chunk: int) -> tuple[float, float]:
    """ms per cycle of each side, their cycles interleaved chunk by chunk, the sides taking
    turns to go first in each pair of chunks: both timed over the same stretch of load."""
    spent = [0.0, 0.0]
    for n, start in enumerate(range(0, cycles, chunk)):
        size = min(chunk, cycles - start)
        for i in (0, 1) if n % 2 == 0 else (1, 0):
            store, claim = (first, second)[i]
            spent[i] += size * _cycle_cost(store, claim, size)
    return spent[0] / cycles, spent[1] / cycles


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


def _fill_before(store: WorkerStore, backlog: int) -> None:
    # Every statement, the completions too, rewritten for that schema (pgkick.connections.qualify).
    store.execute(dev_queries.JOB_TRUNCATE_ALL)
    store.execute(dev_queries.JOB_BACKLOG_FILL_BEFORE_GROUPS, count=backlog)
    store.execute(dev_queries.JOB_TABLE_ANALYZE)


def _beside_before(
    dsn: str, backlog: int, cycles: int, chunk: int, priorities: bool, groups: int
) -> tuple[float, float]:
    """The current claim of a backlog (plain, with priorities, with groups) and the claim
    before 0004 beside it: ms per cycle of each, (before, current), interleaved."""
    _fill_current(dsn, backlog, priorities, groups)
    with (
        WorkerStore.open(dsn, schema=BEFORE, application_name="pgkick-bench") as before,
        WorkerStore.open(dsn, application_name="pgkick-bench") as current,
    ):
        _fill_before(before, backlog)

        def claim_before() -> list[Any]:
            rows = before.rows(
                dev_queries.JOB_CLAIM_BEFORE_GROUPS, queue="default", batch=10, lease=LEASE
            )
            return [ClaimedJob(*row) for row in rows]

        claim_current = partial(current.claim, "default", batch=10, lease=LEASE)
        return _interleaved((before, claim_before), (current, claim_current), cycles, chunk)


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
    try:
        with WorkerStore.open(dsn, application_name="pgkick-bench") as store:
            keyed = partial(store.claim, "default", batch=10, lease=LEASE)
            plain = partial(store.claim, BESIDE, batch=10, lease=LEASE)
            return _interleaved((store, keyed), (store, plain), cycles, chunk)
    finally:
        with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
            db.execute(dev_queries.QUEUE_LIMITS_CLEAR_ALL)


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
    0004 beside it: medians of the rounds, with every round's figures; and the keyed claim's
    ratio to the plain claim beside it."""
    _before_schema(dsn)
    measured: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    # each pair's base, round by round: the claim before 0004's ms (for the keyed claim, the
    # plain claim's beside it)
    before: dict[str, list[float]] = {}
    pairs: dict[str, Callable[[], tuple[float, float]]] = {
        "plain": partial(_beside_before, dsn, backlog, cycles, chunk, False, 0),
        "priorities": partial(_beside_before, dsn, backlog, cycles, chunk, True, 0),
        "priorities_and_groups": partial(_beside_before, dsn, backlog, cycles, chunk, True, 1_000),
        # (plain, keyed): the plain claim is this pair's base
        "rate_and_concurrency_per_key": lambda: _keyed_beside_plain(
            dsn, backlog, cycles, keys, chunk
        )[::-1],
    }
    try:
        for _ in range(rounds):
            for name, measure in pairs.items():
                base_ms, variant_ms = measure()
                measured.setdefault(name, []).append(round(variant_ms, 3))
                before.setdefault(name, []).append(round(base_ms, 3))
                # unrounded: the targets read it (1.304 rounded to 1.3 met a "<= 1.3")
                ratios.setdefault(name, []).append(variant_ms / base_ms)
    finally:
        with WorkerStore.open(dsn, application_name="pgkick-bench") as db:
            db.execute(dev_queries.BENCH_SCHEMA_DROP)
            db.execute(dev_queries.JOB_TRUNCATE_ALL)
    keyed = "rate_and_concurrency_per_key"
    beside = before.pop(keyed)  # the plain claim's ms, measured beside the keyed one
    keyed_ratios = ratios.pop(keyed)
    # the claim before 0004, every pair's figure (variant by variant, round by round)
    measured["before_0004"] = [ms for values in before.values() for ms in values]
    result = {
        "backlog": backlog,
        "keys": keys,
        # issue 33's target: the claim with a rate and a concurrency per key <= 1.3x plain,
        # the plain claim measured beside it (same table, chunks of `chunk` interleaved)
        "keyed_vs_plain": statistics.median(keyed_ratios),
        "spread_keyed_vs_plain": spread(keyed_ratios),
        "plain_beside_keyed_ms": spread(beside),
        "before_beside_ms": {name: spread(values) for name, values in before.items()},
        "chunk": chunk,
        "cycles": cycles,
        "rounds": rounds,
        "ms_per_claim_complete": {k: spread(v)["median"] for k, v in measured.items()},
        "ratio": {k: statistics.median(v) for k, v in ratios.items()},
        "spread_ms": {k: spread(v) for k, v in measured.items()},
        "spread_ratio": {k: spread(v) for k, v in ratios.items()},
    }
    say(f"claim_order: {result}")
    return result
