"""Guarantees that tests used to re-enact instead of driving the real code (issue 31.7, 9, 10).

- The presence protocol on the worker's own path: its linger-or-leave and withdraw-and-claim,
  with a producer's commit-and-check (enqueue_and_kick) wedged before each of its statements.
- The worker's default jitter source: it spreads retries, with nothing injected.
- The runtime's linger: PGKICK_WORKER_LINGER_MS reaches the worker the handler builds.
Each test names the break it was seen failing on."""

from __future__ import annotations

import statistics
import threading
import time
from datetime import timedelta
from typing import Any, LiteralString

import psycopg
import pytest

from pgkick.config import Settings
from pgkick.connections.db import Cursor
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.runtime import Runtime
from tests.helpers import FakeClock, seed
from tests.spies import WAIT
from tests.store import JobStore
from tests.test_watch import RecordingKicker

# Statements the worker sends after its job ran, up to its exit: the round trip that finds
# the queue empty, then BEGIN, the withdrawal, COMMIT and the last claim.
STATEMENTS_AFTER_THE_JOB = 5


class WedgedStore(JobStore):
    """A real JobStore whose statements go one by one (its pipelines unrolled), and that,
    once armed, lets the producer thread in before its `wedge_at`-th statement."""

    wedge_at = -1
    armed = False
    sent = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.paused = threading.Event()
        self.resume = threading.Event()

    def pipeline(self) -> Any:  # one statement at a time: the wedge falls between two
        return _Unrolled()

    def _execute_on(self, cur: Cursor, query: LiteralString, params: dict[str, Any]) -> Cursor:
        if self.armed:
            if self.sent == self.wedge_at:
                self._let_the_producer_in()
            self.sent += 1
        return super()._execute_on(cur, query, params)

    def _let_the_producer_in(self) -> None:
        self.paused.set()
        if not self.resume.wait(WAIT):
            raise AssertionError("the producer never committed")


class _Unrolled:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("wedge_at", range(STATEMENTS_AFTER_THE_JOB + 1))
def test_a_commit_and_check_wedged_anywhere_in_the_workers_exit_never_strands_the_job(
    dsn: str, wedge_at: int
) -> None:
    """The worker runs its one job, finds the queue empty (no linger) and leaves; before its
    `wedge_at`-th statement from there (at its end for the last), an app commits a job and
    checks for a watcher. Either the worker's last claim takes the job or the app kicks.
    Catches the worker withdrawing after its last claim instead of before (in
    withdraw_and_claim or in the loop): wedged between that claim and the withdrawal, the
    app sees the worker still there and does not kick, and the worker leaves the job."""
    kicker = RecordingKicker()
    tasks = Registry()
    app_job: dict[str, int] = {}

    with WedgedStore.open(dsn) as store:
        seed(store, 1, queue="q")

        @tasks.task("noop")
        def run(payload: Any) -> None:
            store.armed = True  # count the worker's statements from here

        def app() -> None:  # another process's enqueue_and_kick: commit, then check
            try:
                if store.paused.wait(WAIT):
                    app_job["id"] = producer.enqueue_and_kick(
                        {}, task="noop", queue="q", dsn=dsn, kicker=kicker
                    )
            finally:
                store.resume.set()

        store.wedge_at = wedge_at
        thread = threading.Thread(target=app)
        thread.start()
        options = WorkerOptions(heartbeat=False, max_fanout=0, linger=timedelta(0))
        summary = Worker(store, tasks, NoKicker(), options).drain("q", lambda: 600_000)
        if not store.paused.is_set():  # the worker sent fewer statements: wedge at its end
            store.paused.set()
        thread.join(WAIT)
        assert "id" in app_job
        ran_it = summary.done == 2
        kicked = kicker.kicks == [("q", "enqueue", 0)]
        assert ran_it or kicked, f"job {app_job['id']} left to nobody ({summary})"
        leftover = store.rows("SELECT count(*) FROM pgkick.queue_watchers WHERE watcher <> 'kick'")
        assert leftover == [(0,)]  # and the worker withdrew


def test_the_default_jitter_spreads_retries_across_ten_percent(dsn: str, clock: FakeClock) -> None:
    """Nothing injected: the worker's own source. Catches a constant source (every retry at
    exactly its backoff: a failed burst returns in lockstep)."""
    tasks = Registry()
    tasks.task("noop")(lambda payload: 1 / 0)
    with JobStore.open(dsn, clock) as store:
        seed(store, 60)
        worker = Worker(store, tasks, NoKicker(), WorkerOptions(batch=60, heartbeat=False))
        assert worker.drain("default", lambda: 600_000).retried == 60
        rows = store.rows("SELECT run_at FROM pgkick.jobs")
    factors = [(row[0] - clock.now).total_seconds() / 20 for row in rows]  # 10 s x 2^1
    assert all(0.9 <= f <= 1.1 for f in factors)
    assert len(set(factors)) >= 55  # drawn, not repeated
    assert min(factors) < 0.95 and max(factors) > 1.05  # across the range
    assert 0.04 < statistics.pstdev(factors) < 0.08  # uniform on 0.9..1.1: 0.0577


def test_the_runtime_passes_the_linger_setting_to_its_worker(dsn: str) -> None:
    """PGKICK_WORKER_LINGER_MS, read by Settings, through Runtime.drain (what the handler
    calls): the worker lingers and takes a job committed meanwhile, and the app, seeing it,
    does not kick. Catches the runtime building its worker without the linger (it would
    leave at once: the app kicks, or the job waits for another invocation)."""
    settings = Settings.from_env(
        {"PGKICK_KICKER": "none", "PGKICK_MAX_FANOUT": "0", "PGKICK_WORKER_LINGER_MS": "3000"}
    )
    assert settings.worker_linger == timedelta(seconds=3)
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    app_kicker = RecordingKicker()
    runtime = Runtime(settings, NoKicker(), dsn=lambda: dsn, tasks=tasks)
    done = threading.Event()

    def app() -> None:  # commits once the worker has announced itself on the empty queue
        with psycopg.connect(dsn, autocommit=True) as look:
            while not done.is_set():
                if look.execute("SELECT 1 FROM pgkick.queue_watchers WHERE queue = 'q'").fetchall():
                    producer.enqueue_and_kick(
                        {}, task="noop", queue="q", dsn=dsn, kicker=app_kicker
                    )
                    return
                done.wait(0.002)

    thread = threading.Thread(target=app)
    thread.start()
    summary = runtime.drain("q", lambda: 600_000)
    done.set()
    thread.join(WAIT)
    assert (summary.claimed, summary.done, summary.stopped_because) == (1, 1, "empty")
    assert app_kicker.kicks == []
    assert summary.duration_ms >= 3000  # it lingered its window after the job, then left


def test_a_wake_up_or_rescue_that_finds_nothing_leaves_at_once_a_kick_still_lingers(
    dsn: str,
) -> None:
    """Each kick's safety wake-up comes a minute later and usually finds its queue served.
    Catches a timer's invocation (reason wake or rescue) that lingers its window on an empty
    queue (billed for nothing, a session held), and one that no longer lingers when a
    producer or a worker kicked (a kick is a flow: jobs may follow)."""
    settings = Settings.from_env(
        {"PGKICK_KICKER": "none", "PGKICK_MAX_FANOUT": "0", "PGKICK_WORKER_LINGER_MS": "2000"}
    )
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    runtime = Runtime(settings, NoKicker(), dsn=lambda: dsn, tasks=tasks)
    for reason in ("wake", "rescue"):
        summary = runtime.drain(f"served-{reason}", lambda: 600_000, reason=reason)
        assert (summary.claimed, summary.stopped_because) == (0, "empty")
        assert summary.duration_ms < 1000, (reason, summary)  # its window is 2 s
    summary = runtime.drain("served-enqueue", lambda: 600_000, reason="enqueue")
    assert summary.claimed == 0 and summary.duration_ms >= 2000
    with JobStore.open(dsn) as store:  # a wake-up with work lingers after it, as before
        seed(store, 3, queue="due")
    summary = runtime.drain("due", lambda: 600_000, reason="wake")
    assert summary.done == 3 and summary.duration_ms >= 2000


def test_a_one_off_kick_leaves_at_once_a_queue_kicked_again_soon_is_lingered_on(
    dsn: str,
) -> None:
    """Issue 31.3: per-tenant queues of one job each. The runtime's worker whose first claim
    got exactly its kick's job, and nothing after, leaves without lingering; the same queue
    kicked again in this environment within a minute has a flow, and is lingered on. Catches
    the linger spent on every one-off queue (x7 the time for 2,000 of them) and a runtime
    that forgets the flow (a trickle of one job a second would cost one invocation a job)."""
    settings = Settings.from_env(
        {"PGKICK_KICKER": "none", "PGKICK_MAX_FANOUT": "0", "PGKICK_WORKER_LINGER_MS": "2000"}
    )
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    runtime = Runtime(settings, NoKicker(), dsn=lambda: dsn, tasks=tasks)
    with JobStore.open(dsn) as store:
        for n in range(20):
            seed(store, 1, queue=f"tenant-{n}")
    started = time.monotonic()
    for n in range(20):
        summary = runtime.drain(f"tenant-{n}", lambda: 600_000)
        assert (summary.done, summary.stopped_because) == (1, "empty")
    assert time.monotonic() - started < 10  # lingering 2 s on each would take 40 s
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="tenant-0")  # kicked again: a flow, the linger is spent
    summary = runtime.drain("tenant-0", lambda: 600_000)
    assert summary.done == 1 and summary.duration_ms >= 2000
    with JobStore.open(dsn) as store:  # and a burst's worker lingers as before
        seed(store, 3, queue="burst")
    summary = runtime.drain("burst", lambda: 600_000)
    assert summary.done == 3 and summary.duration_ms >= 2000
