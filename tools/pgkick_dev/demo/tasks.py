"""The demo's one task: does what its payload says and leaves a trace of every execution.

Why a trace: the demo must prove that no job was lost and none ran twice at
the same time, from what the workers actually did, not from the table alone.
Each execution appends a start line and, if it lives, an end line to a file per
process in $PGKICK_DEMO_TRACE.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

import pgkick_dev.tasks  # noqa: F401  (flaky, crash...: the demo's workers run them too)
from pgkick.tasks import JobContext, task


def _trace(kind: str, job: JobContext) -> None:
    path = Path(os.environ["PGKICK_DEMO_TRACE"]) / f"{os.getpid()}.trace"
    with path.open("a") as out:
        out.write(f"{kind} {job.id} {job.attempt} {os.getpid()} {time.time():.6f}\n")


@task("demo")
def demo(payload: Any, job: JobContext) -> None:
    """payload: {"sleep": seconds} and/or {"fail_times": n}; anything else is a no-op."""
    _trace("start", job)
    if payload.get("sleep"):
        job.lease_lost.wait(float(payload["sleep"]))
    if job.attempt <= int(payload.get("fail_times", 0)):
        _trace("end", job)
        raise RuntimeError(f"failing attempt {job.attempt} on purpose (flaky)")
    _trace("end", job)


def read_traces(folder: Path) -> list[tuple[str, int, int, int, float]]:
    """Every (kind, job_id, attempt, pid, unix time) line the workers wrote."""
    lines = []
    for path in folder.glob("*.trace"):
        for line in path.read_text().splitlines():
            kind, job_id, attempt, pid, at = line.split()
            lines.append((kind, int(job_id), int(attempt), int(pid), float(at)))
    return lines


def overlapping_runs(traces: list[tuple[str, int, int, int, float]]) -> list[int]:
    """Jobs two executions of which overlapped in time (a finished one inside another)."""
    runs: dict[tuple[int, int, int], dict[str, float]] = {}
    for kind, job_id, attempt, pid, at in traces:
        runs.setdefault((job_id, attempt, pid), {})[kind] = at
    by_job: dict[int, list[tuple[float, float]]] = {}
    for (job_id, _, _), times in runs.items():
        if "start" in times:
            by_job.setdefault(job_id, []).append((times["start"], times.get("end", float("inf"))))
    bad = []
    for job_id, spans in by_job.items():
        spans.sort()
        if any(
            later[0] < earlier[1] and earlier[1] != float("inf")
            for earlier, later in itertools.pairwise(spans)
        ):
            bad.append(job_id)
    return sorted(bad)
