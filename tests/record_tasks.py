"""Tasks for multi-process tests: each execution leaves a line in a per-process file."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pgkick_dev.tasks  # noqa: F401  the tests' other tasks, in these workers too
from pgkick import JobContext, task


@task("record")
def record(payload: Any, job: JobContext) -> None:
    """Append "job_id attempt" to $PGKICK_TEST_RECORD/<pid>.log: executions, counted later."""
    path = Path(os.environ["PGKICK_TEST_RECORD"]) / f"{os.getpid()}.log"
    with path.open("a") as log:
        log.write(f"{job.id} {job.attempt}\n")


def executions(folder: Path) -> dict[int, list[tuple[int, int]]]:
    """pid -> [(job_id, attempt), ...] from every process's file."""
    return {
        int(path.stem): [tuple(map(int, line.split())) for line in path.read_text().splitlines()]
        for path in folder.glob("*.log")
    }  # type: ignore[misc]


@task("record_span")
def record_span(payload: Any, job: JobContext) -> None:
    """Append "job_id attempt start_ns end_ns" around a short random wait, so a test can
    check that no two executions of one job overlapped in time."""
    started = time.monotonic_ns()
    time.sleep(random.choice([0, 0.001, 0.003]))
    path = Path(os.environ["PGKICK_TEST_RECORD"]) / f"{os.getpid()}.spans"
    with path.open("a") as log:
        log.write(f"{job.id} {job.attempt} {started} {time.monotonic_ns()}\n")


@task("hang_once")
def hang_once(payload: Any, job: JobContext) -> None:
    """Hangs (60 s) on its first attempt, so its worker dies holding it; then succeeds."""
    if job.attempt == 1:
        time.sleep(60)
