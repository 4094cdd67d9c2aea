"""The article's three ways for workers to wait, side by side under the awake monitor.

Why: "nothing keeps the database awake" only means something next to what the
alternatives do to the same database. One scripted sparse workload (a few
bursts of jobs separated by quiet gaps longer than the suspend window), run
three times, each under its own monitor, on a compressed timeline:

- pgkick: each burst is enqueued with a kick; local workers drain it and exit;
- poll: one worker that claims every second and sleeps when it finds nothing;
- listen: one worker holding LISTEN, woken by NOTIFY, with a fallback poll more
  frequent than the window (as the article advises, to catch missed notices).

Poll and listen reconnect at once when a suspension closes their connection,
as real workers do, and so resume the compute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pgkick.connections.db import Database
from pgkick.errors import DatabaseUnavailable
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer.enqueue import transaction
from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.worker import WorkerStore
from pgkick_dev import queries as dev_queries
from pgkick_dev.awake.chart import Lane, render
from pgkick_dev.awake.monitor import AwakeMonitor, AwakeReport
from pgkick_dev.local.kicker import LocalKicker

MODES = ("pgkick", "poll", "listen")
APP = "pgkick-compare-app"  # the comparison's producer
# Every session the comparison opens, by application name: the local workers' ("pgkick"),
# the waiting peers', the producer's. A suspension closes only these.
OWN_SESSIONS = frozenset({"pgkick", "poll-worker", "listen-worker", APP})
LEASE = timedelta(minutes=5)


@dataclass(frozen=True)
class Workload:
    bursts: int = 3
    jobs_per_burst: int = 50
    gap: float = 6.0  # quiet seconds after a burst ran, before the next: longer than the window
    window: float = 2.0  # the compressed suspend window (10 minutes on Relyt One)
    poll_every: float = 1.0
    listen_fallback: float = 1.5  # fallback poll, more often than the window
    sample_every: float = 0.1  # the monitor's look: fine enough for a 2 s window

    @property
    def scaled_linger_ms(self) -> int:
        """The worker's default linger (1 s of a 10-minute window), compressed like the window."""
        return max(1, round(1000 * self.window / 600))


@dataclass
class ModeResult:
    mode: str
    report: AwakeReport
    empty_polls: int
    jobs_done: int
    job_seconds: list[float]
    burst_seconds: list[float]  # when each burst was enqueued, from the monitor's start

    def minimum_awake(self, window: float) -> float:
        """The least awake time this workload allows: each burst's work, then one window,
        and the first window (watching starts on an awake compute), overlaps counted once."""
        ends = [*self.burst_seconds[1:], float("inf")]
        spans = [(0.0, window)]
        for start, end in zip(self.burst_seconds, ends, strict=True):
            finished = [t for t in self.job_seconds if start <= t < end]
            spans.append((start, (max(finished) if finished else start) + window))
        total, covered = 0.0, 0.0
        for start, stop in sorted(spans):
            if stop > covered:
                total += stop - max(start, covered)
                covered = stop
        return total

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            **self.report.as_dict(),
            "empty_polls": self.empty_polls,
            "jobs_done": self.jobs_done,
        }


def lanes(results: list[ModeResult]) -> list[Lane]:
    """One chart lane per mode, labelled with the fraction its table row prints."""
    return [
        Lane(r.mode, r.report.timeline, r.job_seconds, fraction=r.report.awake_fraction)
        for r in results
    ]


class _Waiter(threading.Thread):
    """A worker that waits in the database: by polling, or by LISTEN with a fallback poll."""

    def __init__(self, dsn: str, queue: str, mode: str, workload: Workload) -> None:
        super().__init__(daemon=True, name=f"pgkick-{mode}")
        self.dsn, self.queue, self.mode, self.workload = dsn, queue, mode, workload
        self.stop_event = threading.Event()
        self.empty_polls = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                with WorkerStore.open(self.dsn, application_name=f"{self.mode}-worker") as store:
                    if self.mode == "listen":
                        store.execute(dev_queries.SESSION_LISTEN)
                    self._loop(store)
            except DatabaseUnavailable:
                self.stop_event.wait(0.2)
            except Exception:  # the suspension closed our connection: reconnect at once
                continue

    def _loop(self, store: WorkerStore) -> None:
        while not self.stop_event.is_set():
            jobs = store.claim(self.queue, batch=10, lease=LEASE)
            if jobs:
                store.complete_many(jobs)
                continue
            self.empty_polls += 1
            if self.mode == "listen":
                list(store.conn.notifies(timeout=self.workload.listen_fallback, stop_after=1))
            else:
                self.stop_event.wait(self.workload.poll_every)


def run_mode(dsn: str, mode: str, workload: Workload, log: Path | None = None) -> ModeResult:
    queue = f"compare-{mode}-{int(time.time() * 1000)}"
    waiter = _Waiter(dsn, queue, mode, workload) if mode != "pgkick" else None
    local = (
        LocalKicker(
            env={"DATABASE_URL": dsn, "PGKICK_WORKER_LINGER_MS": str(workload.scaled_linger_ms)},
            concurrency=2,
            idle_seconds=0.5,
            output=log,
        )
        if mode == "pgkick"
        else None
    )
    kicker: Kicker = local or NoKicker()
    monitor = AwakeMonitor(
        dsn,
        window=workload.window,
        interval=workload.sample_every,
        close_on_suspend=True,
        ignore=frozenset({"pgkick-compare"}),
        close_only=OWN_SESSIONS,  # a suspension here closes what this comparison opened
    )
    started_at = datetime.now(UTC)
    monitor.start()
    if waiter:
        waiter.start()
    ids: list[int] = []
    bursts: list[float] = []
    for burst in range(workload.bursts):
        time.sleep(0.5 if burst == 0 else workload.gap)
        bursts.append((datetime.now(UTC) - started_at).total_seconds())
        ids += _burst(dsn, queue, workload.jobs_per_burst, kicker, notify=mode == "listen")
        _wait_until_finished(dsn, ids)
    time.sleep(workload.window + 2)
    report = monitor.stop()
    if waiter:
        waiter.stop_event.set()
        waiter.join(10)
    empty = waiter.empty_polls if waiter else 0
    if local:
        local.wait_idle(30)
        empty = local.stats.invocations  # each invocation ends on one empty claim
        local.close()
    with MaintenanceStore.open(dsn, application_name="pgkick-compare") as store:
        rows = store.get_many(ids)
    finished = [(r["finished_at"] - started_at).total_seconds() for r in rows if r["finished_at"]]
    done = sum(1 for r in rows if r["status"] == "done")
    return ModeResult(mode, report, empty, done, finished, bursts)


def _wait_until_finished(dsn: str, ids: list[int], timeout: float = 120.0) -> None:
    """Wait for a burst's jobs to finish before its quiet gap starts (in every mode alike),
    on a session the monitor ignores: a gap counted from the enqueue let a loaded machine's
    slow cold start eat it, and the run then showed no suspension where there should be one
    (the gap is quiet time, not time for the burst to run in)."""
    deadline = time.monotonic() + timeout
    with MaintenanceStore.open(dsn, application_name="pgkick-compare") as store:
        while time.monotonic() < deadline:
            if all(row["finished_at"] for row in store.get_many(ids)):
                return
            time.sleep(0.05)


def _burst(dsn: str, queue: str, count: int, kicker: Kicker, *, notify: bool) -> list[int]:
    """The app's burst, on a connection of its own that closes at once: on this compressed
    timeline a producer's lingering second would be a 5-minute linger in real time."""
    with Database.open(dsn, autocommit=False, application_name=APP) as app:
        with transaction(app.conn, kicker=kicker) as jobs:
            ids = jobs.enqueue_many(
                {"payload": {"n": n}, "task": "noop", "queue": queue} for n in range(count)
            )
            if notify:  # the producer's NOTIFY, sent at commit, as the article's LISTEN peers
                app.execute(dev_queries.JOB_NOTIFY_LISTENERS, queue=queue)
    return ids


def compare(
    dsn: str,
    workload: Workload,
    *,
    modes: tuple[str, ...] = MODES,
    png: Path | None = None,
    log: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[ModeResult]:
    """Run each mode in turn on the same database; optionally draw them as one picture."""
    results = []
    for mode in modes:
        progress(f"awake comparison: running {mode} ...")
        results.append(run_mode(dsn, mode, workload, log))
    if png is not None:
        duration = max(r.report.duration for r in results)
        render(png, lanes(results), duration)
    return results
