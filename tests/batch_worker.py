"""A worker process draining a batch task, for tests/test_batch_tasks.py's concurrent run.

Each process registers `collect` (batch=5) in a registry of its own and drains with
pgkick's own Worker. Its first call waits at a barrier shared by every process, so all
of them hold a batch at the same moment (claims that overlap, not one after another);
every call appends "job_id attempt" lines to <folder>/<pid>.log.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from pgkick.kick.kickers import NoKicker
from pgkick.tasks.batch import BatchItem
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.store import JobStore

BATCH = 5


def drain(dsn: str, folder: str, barrier: threading.Barrier) -> None:
    """The process's body (a multiprocessing target): drain `default`, print the summary."""
    tasks = Registry()
    calls = 0

    @tasks.task("collect", batch=BATCH)
    def collect(items: list[BatchItem[Any]]) -> dict[int, object]:
        nonlocal calls
        calls += 1
        if calls == 1:
            barrier.wait(60)  # every worker holds a batch now
        with (Path(folder) / f"{os.getpid()}.log").open("a") as log:
            log.writelines(f"{item.id} {item.attempt}\n" for item in items)
        return {item.id: {"by": os.getpid()} for item in items}

    options = WorkerOptions(batch=BATCH, lease=timedelta(seconds=60), max_fanout=0)
    with JobStore.open(dsn, application_name="batch-worker") as store:
        summary = Worker(store, tasks, NoKicker(), options).drain("default", lambda: 600_000)
    (Path(folder) / f"{os.getpid()}.summary").write_text(json.dumps(summary.as_dict()))
