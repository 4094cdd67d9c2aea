"""Tasks for the demo, the benchmark and the tests: never registered in production.

Why here and not in pgkick.tasks.registry: `crash` kills its worker and `fail` fails every
job; a production worker must not know them by name. They register where they
run: PGKICK_TASKS=pgkick_dev.tasks (the demo's and the tests' workers).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from pgkick.errors import PermanentError
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import task


@task("sleep")
def sleep(payload: Any, job: JobContext) -> None:
    """Sleeps payload["seconds"], waking early if the lease is lost (then it must not write)."""
    job.lease_lost.wait(float(payload.get("seconds", 1)))


@task("flaky")
def flaky(payload: Any, job: JobContext) -> None:
    """Fails its first payload["fail_times"] attempts, then succeeds: retries in action."""
    if job.attempt <= int(payload.get("fail_times", 1)):
        raise RuntimeError(f"flaky: failing attempt {job.attempt} on purpose")


@task("fail")
def fail(payload: Any) -> None:
    """Always fails permanently: a dead job on purpose."""
    raise PermanentError(str(payload.get("reason", "failing on purpose")))


@task("crash")
def crash(payload: Any) -> None:
    """Kills its own worker process, as an out-of-memory job would (the poison-job case)."""
    time.sleep(float(payload.get("after", 0)))
    os.kill(os.getpid(), signal.SIGKILL)


@task("bench_fan_out")
def bench_fan_out(payload: Any, job: JobContext) -> int:
    """Spawns payload["n"] `bench_fan_child` jobs and a `bench_fan_join` after them all:
    the dependencies benchmark's fan-out (pgkick_dev.bench.dependencies)."""
    children = job.spawn_many(
        {"payload": {"i": i}, "task": "bench_fan_child"} for i in range(int(payload["n"]))
    )
    job.spawn({"n": len(children)}, task="bench_fan_join", after=children)
    return len(children)


@task("bench_fan_child")
def bench_fan_child(payload: Any) -> int:
    return int(payload["i"])


@task("bench_fan_join")
def bench_fan_join(payload: Any, job: JobContext) -> int:
    """Sums its parents' results; refuses to finish if one is missing (the fan-in's check)."""
    results = job.parent_results()
    if len(results) != int(payload["n"]):
        raise PermanentError(f"join: {len(results)} results of {payload['n']} children")
    return sum(results.values())
