"""A task of five durable steps that counts its side effects in a file, for tests/test_steps.py.

`python -m tests.step_tasks DSN EFFECTS` drains the default queue once with pgkick's own
Worker in this process, hanging inside step 3 (after saying so on stdout) so the test can
SIGKILL it there; in the test's own process, `steps_registry(effects)` gives the same task
without the hang.
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from pgkick.kick.kickers import NoKicker
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.store import JobStore

STEPS = 5


def record(effects: Path, line: str) -> None:
    """One side effect: a line appended (and synced) before the step returns."""
    fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def steps_registry(effects: Path, *, hang_at: int | None = None) -> Registry:
    tasks = Registry()

    def work(n: int) -> dict[str, int]:
        record(effects, f"start {n}")
        if n == hang_at:
            print(f"hanging in step {n}", flush=True)
            threading.Event().wait()  # until SIGKILL
        record(effects, f"done {n}")
        return {"step": n, "square": n * n}

    @tasks.task("five_steps")
    def five_steps(payload: Any, job: JobContext) -> int:
        return sum(job.step(f"step {n}", work, n)["square"] for n in range(1, STEPS + 1))

    return tasks


def main(dsn: str, effects: str) -> int:
    options = WorkerOptions(batch=1, lease=timedelta(minutes=1), max_fanout=0, heartbeat=False)
    with JobStore.open(dsn, application_name="step-worker") as store:
        tasks = steps_registry(Path(effects), hang_at=3)
        Worker(store, tasks, NoKicker(), options).drain("default", lambda: 600_000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
