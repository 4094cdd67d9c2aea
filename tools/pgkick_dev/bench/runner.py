"""`pgkick bench`: every speed and cost claim, measured side by side on one server in one run.

Why one run: absolute times on a shared 2-core machine drift; ratios measured
together hold. Each item resets the jobs table, runs, and records a row; the
report states each target and whether this run met it. The compared items (the
pipelined ceiling, the drains, the peers) run --repeat times, interleaved, and
are read pair by pair: see pgkick_dev.bench.repeat.

This module holds what every item shares: the sizes of a full and a quick run, the
bench's own connection, the reset and the seed, and the items as `Bench`'s methods
(what `--items` names). Each item's measurement lives in its own module (the drains in
pgkick_dev.bench.drains, the peers in .peers, ...), so the runner stays a list.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.worker import WorkerStore
from pgkick_dev import queries as dev_queries
from pgkick_dev.awake.compare import Workload, compare
from pgkick_dev.bench import claim_order as bench_claim_order
from pgkick_dev.bench import drains as bench_drains
from pgkick_dev.bench import pgbench as bench_sql
from pgkick_dev.bench.cost import CostSizes


class BenchStore(WorkerStore, MaintenanceStore):
    """The bench drains as a worker does and reads the jobs back as an operator would."""


@dataclass(frozen=True)
class Sizes:
    article_jobs: int = 10_000
    drains: tuple[int, ...] = (10_000, 100_000)
    workers: int = 8
    tuned: tuple[int, int] = (2, 25)  # workers x batch: pgqueuer's tuned run, and pgkick's
    singles: int = 2_000
    many: int = 100_000
    latency_samples: int = 200
    idle_seconds: float = 30.0
    history: int = 1_000_000
    scale_jobs: int = 20_000
    claim_backlog: tuple[int, int] = (100_000, 2_000)  # jobs, claim cycles (claim_order)
    kick_seconds: float = 20.0
    quiet_day_seconds: float = 48.0
    lost_kicks: int = 3  # one after the other, about a minute each in real time (bench_lost_kick)
    delayed_jobs: int = 10_000  # delayed_bookings: each in its own minute
    cold_imports: int = 7  # of each handler, in new processes (bench_artifact)
    cold_starts: int = 20  # of the worker and of the floor, each a new environment (cold_path)
    chains: tuple[int, int] = (20, 10)  # chains, steps (dependencies)
    fan_outs: tuple[int, int] = (3, 1_000)  # fan-outs, children, each with its join
    cost: CostSizes = field(default_factory=CostSizes)
    awake: Workload = field(
        default_factory=lambda: Workload(bursts=5, jobs_per_burst=200, gap=6.0, window=2.0)
    )


QUICK = Sizes(
    article_jobs=2_000,
    drains=(2_000,),
    workers=2,
    singles=200,
    many=5_000,
    latency_samples=20,
    idle_seconds=3.0,
    history=20_000,
    scale_jobs=2_000,
    claim_backlog=(5_000, 200),
    kick_seconds=5.0,  # longer than a cold start on a loaded 2-core machine (2.0 let one
    # invocation of the linger-off load drain all its jobs, as the lingering one did)
    quiet_day_seconds=12.0,
    lost_kicks=0,  # minutes each: the full run's only
    delayed_jobs=1_000,
    cold_imports=3,
    cold_starts=2,
    chains=(2, 10),
    fan_outs=(1, 100),
    cost=CostSizes(
        trickle_jobs=2, trickle_gap=1.5, steady_seconds=1.5, burst=500, lingers=(0, 1000)
    ),
    awake=Workload(bursts=2, jobs_per_burst=20, gap=3.0, window=1.0),
)


@dataclass
class Bench:
    dsn: str
    bin_dir: Path
    sizes: Sizes
    log: Path
    results: dict[str, Any] = field(default_factory=dict)
    item_peers: tuple[str, ...] = ()  # the peers the trickle and enqueue items run too (--peers)
    say: Callable[[str], None] = print

    def store(self) -> AbstractContextManager[BenchStore]:
        """The bench's own short connection (its statements are not the measured ones)."""
        return BenchStore.open(self.dsn, application_name="pgkick-bench")

    def reset(self) -> None:
        with self.store() as db:
            db.execute(dev_queries.JOB_TRUNCATE_ALL)
            db.execute(dev_queries.QUEUE_WATCHERS_CLEAR)

    def seed(self, count: int, max_attempts: int = 5) -> None:
        job = {"payload": {}, "task": "noop", "max_attempts": max_attempts}
        for start in range(0, count, 50_000):
            batch = min(50_000, count - start)
            producer.enqueue_many([job] * batch, dsn=self.dsn, kicker=NoKicker())

    def counts(self) -> dict[str, Any]:
        with self.store() as db:
            return bench_sql.status_counts(db.rows(dev_queries.JOB_COUNT_BY_STATUS))

    # 1 (2, the pipelined ceiling, is in bench_repeat) ----------------------------------
    def article_table(self) -> None:
        """The article's naive claim beside pgkick's, through pgbench (bench_drains)."""
        table = bench_drains.article_table(self)
        self.results["article"] = table
        self.say(f"article: naive {table['naive']}, pgkick {table['pgkick']}")

    # 3 (4, the peers, is in bench_repeat) ----------------------------------------
    def drain(self, repeat: int = 0) -> None:
        """pgkick's drains on the local stack, cold then warm, and tuned (bench_drains)."""
        self.results.setdefault("drain", []).extend(bench_drains.drain(self, repeat))

    # 5 and 6 -------------------------------------------------------------------
    def enqueue(self) -> None:
        """Single enqueues (none kicker, local stack, app transaction) beside pgbench's same
        insert, and enqueue_many (bench_enqueue)."""
        from pgkick_dev.bench import enqueue as bench_enqueue

        self.results["enqueue"] = bench_enqueue.rates(self)
        self.say(f"enqueue: {self.results['enqueue']}")

    def kick_to_start(self) -> None:
        """A kick's start-up cost on a warm environment (bench_enqueue)."""
        from pgkick_dev.bench import enqueue as bench_enqueue

        self.results["kick_to_start_ms"] = bench_enqueue.kick_to_start(self)
        self.say(f"kick-to-start: {self.results['kick_to_start_ms']}")

    def quiet_day(self) -> None:
        """A compressed quiet day: the reaper's awake share, and rescues (bench_quiet_day)."""
        from pgkick_dev.bench import quiet_day as bench_quiet_day

        day = bench_quiet_day.QuietDay(seconds=self.sizes.quiet_day_seconds)
        self.results["quiet_day"] = bench_quiet_day.run(self.dsn, day, self.log, self.say)
        if self.sizes.lost_kicks:  # the same lost kick, nothing compressed (bench_lost_kick)
            from pgkick_dev.bench import lost_kick as bench_lost_kick

            lost = bench_lost_kick.run(self.dsn, self.log, samples=self.sizes.lost_kicks)
            self.results["quiet_day"]["lost kicks in real time"] = lost
            self.say(f"lost kicks in real time: {lost}")

    def delayed_bookings(self) -> None:
        """Scheduler calls and the producer's time after commit for delayed jobs over
        distinct minutes, against the local stack's Scheduler API (bench_bookings)."""
        from pgkick_dev.bench import bookings as bench_bookings

        self.results["delayed_bookings"] = bench_bookings.run(
            self.dsn, self.sizes.delayed_jobs, self.reset, self.say
        )

    def artifact(self) -> None:
        """The built artifact's size and each handler's cold import (bench_artifact)."""
        from pgkick_dev.bench import artifact as bench_artifact

        self.results["artifact"] = bench_artifact.run(self.sizes.cold_imports, self.say)

    def cold_path(self) -> None:
        """Commit-to-claim on a new environment beside the import-and-connect floor."""
        from pgkick_dev.bench import cold_path as bench_cold_path

        self.results["cold_path"] = bench_cold_path.run(
            self.dsn, self.sizes.cold_starts, self.log, self.say
        )

    def cost(self) -> None:
        """Three workloads' days in dollars: pgkick measured at each linger, SQS + Lambda
        and an always-on worker modelled from the same durations (bench_cost)."""
        from pgkick_dev.bench import artifact as bench_artifact
        from pgkick_dev.bench import cost as bench_cost
        from pgkick_dev.bench import cost_table
        from pgkick_dev.bench.prices import Prices, template_memory_mb

        memory_mb, memory_from = template_memory_mb(bench_artifact.repository())
        runs = bench_cost.run(self.dsn, self.sizes.cost, self.log, self.say)
        built = cost_table.build(runs, Prices(), memory_mb)
        self.results["cost"] = {"runs": runs, "memory_from": memory_from, **built}

    def producer_threads(self) -> None:
        """Single enqueues from 1, 4, 8 and 16 threads of one process (bench_threads)."""
        from pgkick_dev.bench import threads as bench_threads

        per_thread = max(25, self.sizes.singles // 4)
        self.results["producer_threads"] = bench_threads.run(self.dsn, per_thread, self.say)

    def kicks(self) -> None:
        """Invocations and database sessions per job of single enqueues (bench_kicks)."""
        from pgkick_dev.bench import kicks as bench_kicks

        self.results["kicks"] = bench_kicks.run(
            self.dsn,
            seconds=self.sizes.kick_seconds,
            burst=self.sizes.singles,
            log=self.log,
            say=self.say,
        )

    def trickle(self) -> None:
        """Commit-to-claim of a 20/s trickle, NOTIFY wake-up on and off (bench_trickle)."""
        from pgkick_dev.bench import trickle as bench_trickle

        self.results["trickle"] = bench_trickle.run(
            self.dsn,
            seconds=self.sizes.kick_seconds,
            rounds=2,
            log=self.log,
            say=self.say,
            peers=self.item_peers,
        )

    def dependencies(self) -> None:
        """A chain and a fan-out/fan-in: cost per job, release to start (bench_dependencies)."""
        from pgkick_dev.bench import dependencies as bench_dependencies

        self.results["dependencies"] = bench_dependencies.run(
            self.dsn,
            chain=self.sizes.chains,
            fan_out=self.sizes.fan_outs,
            log=self.log,
            reset=self.reset,
            say=self.say,
        )

    # 7 -------------------------------------------------------------------------
    def scale(self) -> None:
        """A claim + complete's cost beside a long history of finished jobs (bench_drains)."""
        self.results["scale"] = bench_drains.scale(self)
        self.say(f"scale: {self.results['scale']}")

    # 7b: the claim with priorities and groups at a backlog vs the claim before 0004 ------
    def claim_order(self) -> None:
        self.reset()
        backlog, cycles = self.sizes.claim_backlog
        self.results["claim_order"] = bench_claim_order.run(
            self.dsn, backlog=backlog, cycles=cycles, say=self.say
        )

    # 8 -------------------------------------------------------------------------
    def awake(self) -> None:
        self.reset()
        workload = self.sizes.awake
        results = compare(self.dsn, workload, log=self.log)
        rows = [r.as_dict() for r in results]
        pgkick = results[0]
        minimum = min(1.0, pgkick.minimum_awake(workload.window) / pgkick.report.duration)
        self.results["awake"] = {"theoretical_min_fraction": round(minimum, 3), "modes": rows}
        self.say(f"awake: {self.results['awake']}")
