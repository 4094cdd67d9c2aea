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
from pgkick.tasks.registry import JobContext, task


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
