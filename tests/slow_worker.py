"""A worker process whose lease is shorter than its job: `python -m tests.slow_worker DSN`.

The Lambda runtime never lets an invocation outlive its lease (the lease is the
remaining time plus a margin); a worker run by other means, paused by the OS or
cut off by a network partition can. This drives pgkick's own Worker with a
1-second lease, so the test can freeze it and watch fencing protect the job.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

from pgkick.kick.kickers import NoKicker
from pgkick.tasks.registry import registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.demo import tasks  # noqa: F401  (registers the traced "demo" task)
from tests.store import JobStore


def main(dsn: str) -> int:
    options = WorkerOptions(batch=1, lease=timedelta(seconds=1), max_fanout=0)
    with JobStore.open(dsn, application_name="slow-worker") as store:
        summary = Worker(store, registry, NoKicker(), options).drain("default", lambda: 600_000)
    print(json.dumps(summary.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
