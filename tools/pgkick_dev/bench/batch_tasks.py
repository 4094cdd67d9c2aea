"""Jobs/s of a batch task against a plain task, drained by one real worker in one run.

Why: a batch task (issue 33.4) is worth its API only if the worker's grouping costs
nothing per job and the task's own per-call cost (a round trip to a downstream API)
is paid once per batch. Each pair drains the same jobs with pgkick's Worker in this
process, claim batch 10, on a scratch database (pgkick_dev.scratch), once with
`noop`-like tasks and once with a task that spends `--call-ms` per call (a stand-in
for an HTTP request: time.sleep, no CPU). Medians and spreads over `--repeat` runs:

    uv run python -m pgkick_dev.bench.batch_tasks [--dsn postgresql://...] [--jobs 2000]

Not an item of `pgkick bench` (its target count is pinned by tests/test_bench.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from pgkick.kick.kickers import NoKicker
from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.producer import ProducerStore
from pgkick.store.worker import WorkerStore
from pgkick.tasks.batch import BatchItem
from pgkick.tasks.registry import Registry
from pgkick.validation import JobSpec
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev import queries as dev_queries
from pgkick_dev import scratch

CLAIM = 10  # the worker's default claim batch (PGKICK_BATCH), and the batch task's size


def tasks(call_seconds: float) -> Registry:
    """`plain` and `grouped` (batch=CLAIM), each spending `call_seconds` per call."""
    registry = Registry()
    pause: Callable[[float], None] = time.sleep

    @registry.task("plain")
    def plain(payload: Any) -> None:
        if call_seconds:
            pause(call_seconds)

    @registry.task("grouped", batch=CLAIM)
    def grouped(items: list[BatchItem[Any]]) -> None:
        if call_seconds:
            pause(call_seconds)

    return registry


def drain(dsn: str, registry: Registry, task: str, jobs: int) -> float:
    """Seconds one worker takes to drain `jobs` ready jobs of `task`."""
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
    with ProducerStore.open(dsn, application_name="pgkick-bench") as producer:
        spec = JobSpec("default", task, "{}", None, timedelta(0), 5)
        producer.insert_many([[spec] * jobs])
    options = WorkerOptions(batch=CLAIM, lease=timedelta(seconds=60), max_fanout=0, heal=False)
    with WorkerStore.open(dsn, application_name="pgkick-bench") as store:
        started = time.perf_counter()
        summary = Worker(store, registry, NoKicker(), options).drain("default", lambda: 600_000)
        elapsed = time.perf_counter() - started
    assert summary.done == jobs, summary
    return elapsed


def measure(dsn: str, jobs: int, repeat: int, call_ms: float) -> list[dict[str, Any]]:
    rows = []
    for cost in (0.0, call_ms / 1000):
        registry = tasks(cost)
        rates: dict[str, list[float]] = {"plain": [], "grouped": []}
        for _ in range(repeat):  # interleaved, so drift on a shared machine hits both
            for task in rates:
                rates[task].append(jobs / drain(dsn, registry, task, jobs))
        for task, values in rates.items():
            rows.append(
                {
                    "task": "batch task (batch=10)" if task == "grouped" else "plain task",
                    "call_ms": cost * 1000,
                    "jobs": jobs,
                    "jobs_per_s_median": round(statistics.median(values)),
                    "jobs_per_s_min": round(min(values)),
                    "jobs_per_s_max": round(max(values)),
                }
            )
    return rows


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    """The --dsn given (claimed as scratch), else an embedded server of its own."""
    if dsn:
        scratch.claim(dsn, "bench")
        yield dsn
        return
    from pgkick_dev.embedded import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="pgkick-batch-bench-") as root:
        Path(root).chmod(0o755)
        server = EmbeddedPostgres(Path(root) / "data", settings=scratch.TEST_SETTINGS)
        try:
            started = server.start()
            scratch.claim(started, "bench")
            yield started
        finally:
            server.stop("immediate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--call-ms", type=float, default=2.0)
    args = parser.parse_args()
    with database(args.dsn) as dsn:
        for row in measure(dsn, args.jobs, args.repeat, args.call_ms):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
