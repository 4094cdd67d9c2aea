"""`pgkick demo`: the whole product on an embedded PostgreSQL 17, through the real code paths.

Why a scenario and not a toy: a new user should see, in one command, what a
production day looks like: bursts enqueued with `enqueue_and_kick` (some in an
app transaction, one rolled back), workers started by kicks in separate
processes running the Lambda handler, a flaky job retried with backoff and woken
at its run_at, a worker killed mid-job and its job rescued by the reaper, then
quiet, while the awake monitor watches what the database would have cost.
It exits non-zero if any job was lost or ran twice at the same time.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pgkick.connections.db import Database
from pgkick.producer import enqueue as producer
from pgkick.store import migrations as schema
from pgkick.store.maintenance import MaintenanceStore
from pgkick.worker.reaper import reap
from pgkick_dev.awake.monitor import AwakeMonitor
from pgkick_dev.demo.traces import read_traces
from pgkick_dev.local.kicker import LocalKicker

MONITOR_APP = "pgkick-demo"  # the demo's own progress queries: not counted as activity
WORKER_LINGER_MS = 1_000  # the default, stated: the trickle's bound counts longer pauses


@dataclass
class DemoOptions:
    jobs: int = 2_000
    window: float = 5.0  # the compressed suspend window
    workers: int = 4
    data_dir: Path | None = None
    keep: bool = False
    dsn: str | None = None
    compare: bool = True
    out: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "pgkick-demo")


@dataclass
class DemoRun:
    """What the scenario did, for the report."""

    dsn: str
    queue: str
    trace_dir: Path
    ids: list[int] = field(default_factory=list)
    single_ids: list[int] = field(default_factory=list)  # a trickle of single enqueues
    single_invocations: int = 0  # the worker invocations that trickle cost
    trickle: dict[str, int] = field(default_factory=dict)  # what explains them (_trickle_costs)
    rolled_back_kicks: int = 0
    killed_job: int | None = None
    drain_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    awake: dict[str, Any] = field(default_factory=dict)
    timeline: list[tuple[float, bool]] = field(default_factory=list)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def _trickle_costs(
    kicker: LocalKicker, queue: str, since: float, committed: list[float]
) -> dict[str, int]:
    """What a trickle's invocations are allowed to be, counted from what happened.

    A worker lingers on a queue it has seen kicked before in its environment
    (pgkick.worker.runtime.RecentQueues): so each environment the trickle reaches may
    spend one one-off invocation (one job, no linger), then one lingering worker takes
    the rest. It costs one more per pause between two commits longer than the linger
    (the worker left), and per hand-over (a lingering worker's time ran out: hop > 0).
    On a loaded machine a kick can land while the one-off still runs: a second
    environment starts, as on Lambda. Usually 2 invocations in 1 environment."""
    starts = [
        e
        for e in kicker.stack.timeline.events(since=since, limit=10_000)
        if e["kind"] == "invoke_start" and e["queue"] == queue
    ]
    gaps = [later - earlier for earlier, later in itertools.pairwise(committed)]
    return {
        "environments": len({e.get("environment") for e in starts}),
        "pauses": sum(gap > WORKER_LINGER_MS / 1000 for gap in gaps),
        "hand_overs": sum(1 for e in starts if (e["hop"] or 0) > 0),
    }


class Progress:
    """One live line of counts, redrawn in place; plain lines when not on a terminal."""

    def __init__(self, db: MaintenanceStore, queue: str, stream: Any = None) -> None:
        self.db, self.queue, self.stream = db, queue, stream or sys.stderr
        self.tty = self.stream.isatty()

    def step(self, text: str) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + f"== {text}\n")
        self.stream.flush()

    def counts(self) -> dict[str, int]:
        for row in self.db.stats_by_queue():
            if row["queue"] == self.queue:
                return {k: int(row[k]) for k in ("queued", "running", "done", "failed")}
        return {"queued": 0, "running": 0, "done": 0, "failed": 0}

    def wait(self, until: Callable[[dict[str, int]], bool], timeout: float) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while True:
            counts = self.counts()
            if self.tty:
                line = "  ".join(f"{k} {v}" for k, v in counts.items())
                self.stream.write(f"\r\033[K   {line}")
                self.stream.flush()
            if until(counts) or time.monotonic() > deadline:
                if self.tty:
                    self.stream.write("\n")
                return counts
            time.sleep(0.25)


def run(options: DemoOptions, *, on_step: Callable[[str], None] | None = None) -> DemoRun:
    """Play the scenario; the caller reports on the returned DemoRun."""
    queue = f"demo-{int(time.time())}"
    options.out.mkdir(parents=True, exist_ok=True)
    trace_dir = Path(tempfile.mkdtemp(prefix="trace-", dir=options.out))
    trace_dir.chmod(0o777)
    state = DemoRun(dsn=options.dsn or "", queue=queue, trace_dir=trace_dir)
    with MaintenanceStore.open(state.dsn, application_name=MONITOR_APP) as store:
        schema.migrate(store)
        progress = Progress(store, queue)
        say = on_step or progress.step
        kicker = LocalKicker(
            env={
                "DATABASE_URL": state.dsn,
                "PGKICK_TASKS": "pgkick_dev.demo.tasks",
                "PGKICK_DEMO_TRACE": str(trace_dir),
                "PGKICK_LEASE_SECONDS": "3",
                "PGKICK_LEASE_MARGIN_SECONDS": "1",
                "PGKICK_WORKER_LINGER_MS": str(WORKER_LINGER_MS),
                "POWERTOOLS_LOG_LEVEL": "WARNING",
            },
            concurrency=options.workers,
            timeout_ms=5_000,
            idle_seconds=2.0,
            retry_delays=(1.0, 2.0),  # Lambda's 1 and 2 minutes, compressed like the rest
            throttle_backoff=(0.1, 2.0),  # Lambda's 1 s to 5 min, compressed too
            fast_scheduler=True,  # the labelled kindness: a wake-up at its second, not minute
            output=options.out / "workers.log",
        )
        monitor = AwakeMonitor(
            state.dsn,
            window=options.window,
            close_on_suspend=False,
            ignore=frozenset({MONITOR_APP}),
        ).start()
        try:
            _scenario(state, options, store, kicker, progress, say)
        finally:
            report = monitor.stop()
            kicker.close()
        state.awake = report.as_dict()
        state.timeline = report.timeline
    return state


def _scenario(
    state: DemoRun,
    options: DemoOptions,
    store: MaintenanceStore,
    kicker: LocalKicker,
    progress: Progress,
    say: Callable[[str], None],
) -> None:
    queue = state.queue
    say(f"burst: {options.jobs} jobs in one enqueue_many, kicked once")
    started = time.monotonic()
    state.ids += producer.enqueue_many(
        [{"payload": {"n": n}, "task": "demo", "queue": queue} for n in range(options.jobs)],
        dsn=state.dsn,
        kicker=kicker,
    )
    progress.wait(lambda c: c["queued"] == 0 and c["running"] == 0, 300)
    state.drain_seconds = time.monotonic() - started

    say("a trickle: 20 single enqueue_and_kick calls, 50 ms apart")
    kicker.wait_idle(30)
    before, since = kicker.stats.invocations, time.time()
    committed: list[float] = []
    for n in range(20):
        state.single_ids.append(
            producer.enqueue_and_kick(
                {"single": n}, task="demo", queue=queue, dsn=state.dsn, kicker=kicker
            )
        )
        committed.append(time.monotonic())
        time.sleep(0.05)
    kicker.wait_idle(30)
    state.single_invocations = kicker.stats.invocations - before
    state.trickle = _trickle_costs(kicker, queue, since, committed)
    state.ids += state.single_ids

    say("an app transaction with 3 jobs, committed; another with 1 job, rolled back")
    with Database.open(state.dsn, autocommit=False) as app:
        with producer.transaction(app.conn, kicker=kicker) as jobs:
            state.ids += [jobs.enqueue({"order": n}, task="demo", queue=queue) for n in range(3)]
        before = kicker.stats.invocations
        try:
            with producer.transaction(app.conn, kicker=kicker) as jobs:
                jobs.enqueue({"order": "cancelled"}, task="demo", queue=queue)
                raise _Rollback
        except _Rollback:
            state.rolled_back_kicks = kicker.stats.invocations - before
    kicker.wait_idle(30)  # a worker records a batch's outcomes together: keep the victim alone

    say("a flaky job: fails once, retried after about 20 s, woken by a timer at its run_at")
    state.ids.append(
        producer.enqueue_and_kick(
            {"fail_times": 1}, task="demo", queue=queue, dsn=state.dsn, kicker=kicker
        )
    )
    kicker.wait_idle(30)

    say("a slow job whose worker is killed mid-job (SIGKILL)")
    victim = producer.enqueue_and_kick(
        {"sleep": 2}, task="demo", queue=queue, dsn=state.dsn, kicker=kicker
    )
    state.ids.append(victim)
    state.killed_job = victim
    _kill_worker_of(victim, state.trace_dir)
    say("lease expires; the reaper re-queues the job and kicks a worker")
    _wait_for(lambda: _lease_expired(store, victim), 30)
    reaped = reap(store, kicker, retention=timedelta(days=7))
    say(f"reaper: requeued {reaped['requeued']}, kicked {reaped['kicked']}")

    say("waiting for every job to end (the flaky retry wakes at its run_at)")
    progress.wait(lambda c: c["queued"] == 0 and c["running"] == 0, 120)
    kicker.wait_idle(30)
    say(f"quiet: no worker, no query; waiting {options.window + 2:.0f} s for the suspend")
    time.sleep(options.window + 2)


class _Rollback(Exception):
    """The app's own error, which rolls back its transaction."""


def _kill_worker_of(job_id: int, trace_dir: Path) -> None:
    """SIGKILL the process whose trace shows it started the job."""

    def started_by() -> int | None:
        pids = [
            pid
            for kind, job, _, pid, _ in read_traces(trace_dir)
            if kind == "start" and job == job_id
        ]
        return pids[0] if pids else None

    _wait_for(lambda: started_by() is not None, 30)
    os.kill(started_by() or 0, signal.SIGKILL)


def _lease_expired(store: MaintenanceStore, job_id: int) -> bool:
    (job,) = store.get_many([job_id])
    return bool(job["status"] != "running" or job["locked_until"] < datetime.now(UTC))


def _wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the demo waited too long; see the workers' log")
        time.sleep(0.1)


def cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
