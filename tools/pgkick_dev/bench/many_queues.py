"""Many queues of one job each (per-tenant queues), with the worker's linger on and off.

Why: a worker lingered its whole window on its own empty queue after a one-off kick, so
2,000 single-job queues on 4 execution environments took x7 the time with the linger on
(issue 31.3). Run on the faithful local kicker (every event kept), timing until every job is
done, plus the trickle's invocations per job with the linger on, which the fix must keep:

    uv run python -m pgkick_dev.bench.many_queues --dsn postgresql://... [--queues 2000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pgkick.producer import enqueue as producer
from pgkick.store.maintenance import MaintenanceStore
from pgkick_dev import queries as dev_queries
from pgkick_dev.bench.kicks import KickLoad, measure
from pgkick_dev.local.kicker import LocalKicker


def many_queues(dsn: str, queues: int, linger_ms: int, log: Path, concurrency: int = 4) -> Any:
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
        store.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    local = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_WORKER_LINGER_MS": str(linger_ms),
        },
        concurrency=concurrency,
        timeout_ms=900_000,
        output=log,
    )
    try:
        started = time.monotonic()
        for n in range(queues):
            producer.enqueue_and_kick({}, task="noop", queue=f"tenant-{n}", dsn=dsn, kicker=local)
        done_at = None
        with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
            while done_at is None and time.monotonic() - started < 900:
                rows = store.dicts(dev_queries.JOB_LATENCY_ALL)
                if len(rows) == queues and all(row["status"] == "done" for row in rows):
                    done_at = time.monotonic() - started
                else:
                    time.sleep(0.2)
        local.wait_idle(900, include_wakes=True)
        idle_at = time.monotonic() - started
    finally:
        local.close()
    return {
        "queues": queues,
        "linger_ms": linger_ms,
        "all_done_s": round(done_at or -1, 1),
        "kicks_idle_s": round(idle_at, 1),
        "invocations": local.stats.invocations,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--queues", type=int, default=2000)
    parser.add_argument("--trickle-seconds", type=float, default=20)
    parser.add_argument("--log", default="/tmp/many_queues.log")
    args = parser.parse_args()
    log = Path(args.log)
    for linger_ms in (0, 1000):
        print(json.dumps(many_queues(args.dsn, args.queues, linger_ms, log)), flush=True)
    load = KickLoad("steady 50/s", 50, round(50 * args.trickle_seconds))
    print(json.dumps(measure(args.dsn, load, log)), flush=True)


if __name__ == "__main__":
    main()
