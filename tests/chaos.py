"""A harness for the chaos scenarios: real worker processes, short leases, a fast reaper.

Workers are the Lambda handler in local execution environments (the local
kicker), running pgkick's demo task, which leaves a trace of every execution.
Leases are 3 s (a 2 s invocation budget + 1 s), backoff 200 ms, so each
scenario takes seconds. Recovery time is measured from the fault to the moment
every job is in a final state; the results are printed at the end of the run.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from pgkick.errors import DatabaseUnavailable
from pgkick.kick.kickers import Kicker
from pgkick.producer import enqueue as producer
from pgkick.worker.reaper import reap
from pgkick_dev.demo.traces import overlapping_runs, read_traces
from pgkick_dev.local.kicker import LocalKicker
from tests.store import JobStore

RESULTS: list[dict[str, Any]] = []  # printed by conftest's terminal summary
ROOT = Path(__file__).parent.parent


class Chaos:
    def __init__(
        self, dsn: str, folder: Path, *, concurrency: int = 2, timeout_ms: int = 4_000, **env: str
    ) -> None:
        self.dsn = dsn
        self.traces = folder / "traces"
        self.traces.mkdir(exist_ok=True)
        self.traces.chmod(0o777)
        self.kicker = LocalKicker(
            env={
                "DATABASE_URL": dsn,
                "PGKICK_TASKS": "pgkick_dev.demo.tasks",
                "PGKICK_DEMO_TRACE": str(self.traces),
                "PGKICK_LEASE_SECONDS": "1",
                "PGKICK_LEASE_MARGIN_SECONDS": "1",
                "PGKICK_BACKOFF_MS": "200",
                "PGKICK_BACKOFF_CAP_SECONDS": "2",
                "PGKICK_MIN_REMAINING_MS": "500",
                "POWERTOOLS_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT),
                **env,
            },
            concurrency=concurrency,
            timeout_ms=timeout_ms,
            idle_seconds=1.0,
            retry_delays=(0.2, 0.4),  # Lambda's 1 and 2 minutes, scaled down
            throttle_backoff=(0.05, 1.0),  # Lambda's backoff, scaled down the same way
            fast_scheduler=True,  # the labelled kindness: rescues at the second, not the minute
            output=folder / "workers.log",
        )

    def enqueue(
        self,
        count: int,
        payload: dict[str, Any] | None = None,
        *,
        task: str = "demo",
        max_attempts: int = 5,
        kicker: Kicker | None = None,
    ) -> list[int]:
        return producer.enqueue_many(
            [{"payload": payload or {}, "task": task, "max_attempts": max_attempts}] * count,
            dsn=self.dsn,
            kicker=kicker or self.kicker,
        )

    def kick(self, times: int = 1) -> None:
        for _ in range(times):
            self.kicker.kick("default", "manual")

    def jobs(self, ids: list[int]) -> list[dict[str, Any]]:
        with JobStore.open(self.dsn, application_name="chaos-observer") as store:
            return store.get_many(ids)

    def statuses(self, ids: list[int]) -> Counter[str]:
        return Counter(job["status"] for job in self.jobs(ids))

    def wait_until(self, ids: list[int], condition: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition(self.statuses(ids)):
                    return
            except DatabaseUnavailable:
                pass  # restarting, or out of connections: look again
            assert time.monotonic() < deadline, f"timed out: {self.statuses(ids)}"
            time.sleep(0.05)

    def busy_pids(self) -> list[int]:
        return self.kicker.processes()

    def kill_busy(self, sig: int = signal.SIGKILL) -> list[int]:
        pids = self.busy_pids()
        for pid in pids:
            os.kill(pid, sig)
        return pids

    def recover(self, ids: list[int], timeout: float = 60.0) -> float:
        """Run the reaper every 200 ms (a compressed schedule) until every job is final;
        returns the seconds it took."""
        started = time.monotonic()
        while True:
            try:
                with JobStore.open(self.dsn, application_name="chaos-reaper") as store:
                    reap(store, self.kicker, retention=timedelta(days=1))
                    if not any(j["status"] in ("queued", "running") for j in store.get_many(ids)):
                        return time.monotonic() - started
            except DatabaseUnavailable:
                pass  # the server is restarting: so is everyone
            assert time.monotonic() - started < timeout, f"not recovered: {self.statuses(ids)}"
            time.sleep(0.2)

    def overlaps(self) -> list[int]:
        return overlapping_runs(read_traces(self.traces))

    def record(self, scenario: str, recovery: float, **facts: Any) -> None:
        RESULTS.append({"scenario": scenario, "recovery_s": round(recovery, 2), **facts})

    def close(self) -> None:
        self.kicker.close()
