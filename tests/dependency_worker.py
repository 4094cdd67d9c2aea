"""A worker process for the dependency tests: drains the queues named in argv with the
real Worker loop until the file $PGKICK_TEST_STOP exists (a harness's loop in place of
kicks, so that several processes work the same queues at once)."""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import tests.dependency_tasks  # noqa: F401  the tasks, registered
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.registry import registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.store import JobStore

OPTIONS = WorkerOptions(
    batch=int(os.environ.get("PGKICK_BATCH", "10")), heal=False, lease=timedelta(seconds=30)
)


def main() -> None:
    stop = Path(os.environ["PGKICK_TEST_STOP"])
    queues = sys.argv[1:]
    with JobStore.open(os.environ["DATABASE_URL"]) as store:
        worker = Worker(store, registry, NoKicker(), OPTIONS)
        while not stop.exists():
            done = sum(worker.drain(queue, lambda: 60_000).claimed for queue in queues)
            if not done:
                time.sleep(0.01)


if __name__ == "__main__":
    main()
