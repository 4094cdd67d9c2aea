"""The demo's one task: does what its payload says and leaves a trace of every execution.

Why a trace: the demo must prove that no job was lost and none ran twice at
the same time, from what the workers actually did, not from the table alone.
Each execution appends a start line and, if it lives, an end line to a file per
process in $PGKICK_DEMO_TRACE.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pgkick_dev.tasks  # noqa: F401  (flaky, crash...: the demo's workers run them too)
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import task


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
