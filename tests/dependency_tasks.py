"""Tasks for the dependency tests (issue 34), imported by the test process and by the
worker processes it starts (PGKICK_TASKS=tests.dependency_tasks): each run leaves a line
"job_id name start_ns end_ns" in $PGKICK_TEST_RECORD/<pid>.runs, counted later."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pgkick import JobContext, PermanentError, task


def _record(job: JobContext, name: str, started: int) -> None:
    folder = os.environ.get("PGKICK_TEST_RECORD")
    if folder:
        with (Path(folder) / f"{os.getpid()}.runs").open("a") as log:
            log.write(f"{job.id} {name} {started} {time.monotonic_ns()}\n")


@task("dag_node")
def dag_node(payload: Any, job: JobContext) -> str:
    """A node of a DAG: records its run (and fails for good if payload says so, or on the
    attempts listed in payload['fail_attempts'])."""
    started = time.monotonic_ns()
    time.sleep(payload.get("sleep", 0))
    _record(job, payload["name"], started)
    if payload.get("fail") or job.attempt in payload.get("fail_attempts", []):
        raise PermanentError(f"node {payload['name']} fails")
    return str(payload["name"])


@task("fan_out")
def fan_out(payload: Any, job: JobContext) -> int:
    """Spawns payload['n'] children and a join waiting for all of them; fails after the
    spawn on the attempts listed in payload['fail_attempts'] (the retry spawns afresh)."""
    queue = payload.get("queue", "default")
    children = job.spawn_many(
        {"payload": {"i": i}, "task": "fan_child", "queue": queue} for i in range(payload["n"])
    )
    job.spawn({"n": payload["n"]}, task="fan_join", queue=queue, after=children)
    if job.attempt in payload.get("hang_attempts", []):  # a test SIGKILLs this process now
        _record(job, "spawned", time.monotonic_ns())
        time.sleep(120)
    if job.attempt in payload.get("fail_attempts", []):
        raise RuntimeError(f"fan_out fails after spawning on attempt {job.attempt}")
    _record(job, "fan_out", time.monotonic_ns())
    return len(children)


@task("fan_child")
def fan_child(payload: Any, job: JobContext) -> int:
    return int(payload["i"])


@task("fan_join")
def fan_join(payload: Any, job: JobContext) -> int:
    results = job.parent_results()
    _record(job, f"join:{len(results)}:{sum(results.values())}", time.monotonic_ns())
    return sum(results.values())
