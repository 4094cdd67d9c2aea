"""Tasks for the dependency tests (issue 34), imported by the test process and by the
worker processes it starts (PGKICK_TASKS=tests.dependency_tasks): each run leaves a line
"job_id name start_ns end_ns" in $PGKICK_TEST_RECORD/<pid>.runs, counted later."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta
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


# What the in-process tests run inside `spawn_then`, after its spawn, before it returns
# (a lease taken over, say); the worker processes leave it empty.
AFTER_SPAWN: list[Callable[[JobContext], None]] = []


@task("spawn_then")
def spawn_then(payload: Any, job: JobContext) -> list[int]:
    """Spawns payload['n'] children (in payload's queue, delayed by its delay, after its
    parent) and a join
    after them; runs the test's hooks; then sleeps payload['sleep'] seconds if given (a
    durable sleep: this run ends, the next replays it and spawns again)."""
    options = {"queue": payload.get("queue", "default")}
    if "delay" in payload:
        options["delay"] = payload["delay"]
    if "parent" in payload:  # a parent outside the fan-out, for every child
        options["after"] = [payload["parent"]]
    children = job.spawn_many(
        {"payload": {"i": i}, "task": "fan_child", **options} for i in range(payload["n"])
    )
    job.spawn({"n": payload["n"]}, task="fan_join", queue=options["queue"], after=children)
    for hook in AFTER_SPAWN:
        hook(job)
    if "sleep" in payload:
        job.sleep(payload["sleep"])
    return children


@task("spawn_badly")
def spawn_badly(payload: Any, job: JobContext) -> list[str]:
    """Tries spawns that must be refused at the call; returns what each raised."""
    tries: list[Callable[[], Any]] = [
        lambda: job.spawn({}, task="fan_child", unique_key="k"),
        lambda: job.spawn({}, task="fan_child", unique_key="k", debounce=timedelta(seconds=5)),
        lambda: job.spawn({}, task="fan_child", after=[payload["missing"]]),
        lambda: job.spawn_many(
            [{"payload": {}, "task": "fan_child"}, {"payload": {}, "task": "fan_child", "x": 1}]
        ),
        lambda: job.step("inside", lambda: job.spawn({}, task="fan_child")),
    ]
    said = []
    for attempt in tries:
        try:
            attempt()
            said.append("accepted")
        except Exception as exc:
            said.append(f"{type(exc).__name__}: {exc}")
    return said
