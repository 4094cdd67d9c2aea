"""Chaos: crashes, restarts, killed sessions, exhaustion, storms, lost kicks, a frozen worker,
a suspending compute. Every job ends done or failed for a stated reason; none is lost; none is
completed by a worker that lost its lease. Recovery times are measured and printed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgkick.kick.watch import FIRST_PAUSE
from pgkick.store import migrations as schema
from pgkick_dev.awake.monitor import AwakeMonitor
from pgkick_dev.embedded import EmbeddedPostgres
from tests.chaos import ROOT, Chaos
from tests.conftest import FAST_SETTINGS
from tests.helpers import statement_calls
from tests.store import JobStore


@pytest.fixture
def chaos(dsn: str, tmp_path: Path) -> Iterator[Chaos]:
    harness = Chaos(dsn, tmp_path)
    yield harness
    harness.close()


@pytest.fixture
def own_server() -> Iterator[EmbeddedPostgres]:
    """A server of this test's own, to restart, stop or starve without touching the others."""
    root = Path(tempfile.mkdtemp(prefix="pgkick-chaos-"))
    root.chmod(0o755)
    server = EmbeddedPostgres(root / "data", settings={**FAST_SETTINGS, "max_connections": "12"})
    server.start()
    with JobStore.open(server.dsn) as store:
        schema.migrate(store)
    yield server
    server.stop("immediate")
    shutil.rmtree(root, ignore_errors=True)


def test_crash_recovery(chaos: Chaos) -> None:
    ids = chaos.enqueue(100, {"sleep": 0.05})
    chaos.wait_until(ids, lambda s: s["running"] > 0 and s["done"] > 0)
    killed = chaos.kill_busy()
    recovery = chaos.recover(ids)
    jobs = chaos.jobs(ids)
    assert killed and {j["status"] for j in jobs} == {"done"}
    attempts = [j["attempts"] for j in jobs]
    assert max(attempts) == 2 and attempts.count(2) >= 1  # interrupted ones ran once more
    assert chaos.overlaps() == []
    chaos.record("crash_recovery", recovery, killed=len(killed), rerun=attempts.count(2))


def test_repeated_kills_and_a_poison_job(chaos: Chaos) -> None:
    ids = chaos.enqueue(150, {"sleep": 0.02})
    (poison,) = chaos.enqueue(1, task="crash", max_attempts=3)
    killed = 0
    for _ in range(3):
        chaos.wait_until(ids, lambda s: s["running"] > 0, timeout=30)
        killed += len(chaos.kill_busy())
        time.sleep(0.3)
    recovery = chaos.recover([*ids, poison])
    assert chaos.statuses(ids) == {"done": 150}
    (dead,) = chaos.jobs([poison])
    assert (dead["status"], dead["attempts"]) == ("failed", 3)
    assert dead["last_error"] == "lease expired (attempt 3 of 3)"
    assert chaos.overlaps() == []
    chaos.record("repeated_kills", recovery, killed=killed, poison="failed at 3 of 3")


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgres_restart(own_server: EmbeddedPostgres, tmp_path: Path, mode: str) -> None:
    harness = Chaos(own_server.dsn, tmp_path)
    try:
        ids = harness.enqueue(300, {"sleep": 0.01})
        harness.wait_until(ids, lambda s: s["done"] >= 30)
        started = time.monotonic()
        own_server.restart(mode)
        recovery = harness.recover(ids)
        assert harness.statuses(ids) == {"done": 300}
        assert harness.overlaps() == []
        assert max(j["attempts"] for j in harness.jobs(ids)) <= 2
        harness.record(
            f"postgres_restart_{mode}",
            recovery,
            restart_s=round(time.monotonic() - started - recovery, 2),
            worker_errors=harness.kicker.stats.errors,
        )
    finally:
        harness.close()


def test_pg_backend_kill(chaos: Chaos, dsn: str) -> None:
    ids = chaos.enqueue(300, {"sleep": 0.01})
    chaos.wait_until(ids, lambda s: s["done"] >= 30)
    # Kill the workers' sessions mid-drain. A worker between two sessions (one invocation
    # ended, the next not yet connected: seen on a loaded machine, nothing to kill at that
    # instant) is not the case under test: look again while jobs are left.
    killed: tuple[int] | None = None
    with psycopg.connect(dsn, autocommit=True) as admin:
        while not (killed and killed[0]) and chaos.statuses(ids).get("done", 0) < 300:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = 'pgkick'"
            ).fetchone()
    recovery = chaos.recover(ids)
    assert killed and killed[0] >= 1
    assert chaos.statuses(ids) == {"done": 300} and chaos.overlaps() == []
    chaos.record("pg_backend_kill", recovery, sessions_killed=killed[0])


def test_connection_exhaustion(own_server: EmbeddedPostgres, tmp_path: Path) -> None:
    """max_connections 12, ten held by an app: nine workers kicked, one or two get in."""
    harness = Chaos(own_server.dsn, tmp_path, concurrency=9, PGKICK_CONNECT_RETRIES="0")
    hogs = [psycopg.connect(own_server.dsn) for _ in range(10)]
    try:
        ids = harness.enqueue(200, {"sleep": 0.02})
        harness.kick(9)
        started = time.monotonic()
        harness.wait_until(ids, lambda s: s["queued"] == 0 and s["running"] == 0, timeout=60)
        recovery = time.monotonic() - started
        errors = [r["error"] for r in harness.kicker.stats.results if "error" in r]
        assert any("too many clients" in e or "reserved for" in e for e in errors), errors[:3]
        # Read as wait_until reads, through refusals: a worker leaving may still hold one of
        # the two free slots (seen: the observer refused right after every job ended).
        harness.wait_until(ids, lambda s: s == {"done": 200}, timeout=30)
        harness.record("connection_exhaustion", recovery, refused_invocations=len(errors))
    finally:
        for hog in hogs:
            hog.close()
        harness.close()


def claim_calls(dsn: str) -> int:
    return statement_calls(dsn, ["-- job\\_claim:%"])


def test_retry_storm(chaos: Chaos, dsn: str, tmp_path: Path) -> None:
    """Every job fails twice: backoff spreads the retries, timers wake the workers, no hot loop."""
    before = claim_calls(dsn)
    ids = chaos.enqueue(100, {"fail_times": 2})
    started = time.monotonic()
    chaos.wait_until(ids, lambda s: s.get("done", 0) == 100, timeout=60)
    recovery = time.monotonic() - started
    claims = claim_calls(dsn) - before
    # Seen once in a loaded CI run (2026-12-04): a job done at its 4th attempt. Its workers'
    # lines go with the failure, so the next one says how (a lease lost, a worker cut off).
    extra = [job for job in chaos.jobs(ids) if job["attempts"] != 3]
    assert not extra, (extra, _log_lines_of(tmp_path / "workers.log", [j["id"] for j in extra]))
    # No hot loop: 30 full batches of work, and each of the 2 workers, while it waits for
    # retries coming due and for its last window (1 s), claims an empty queue at most once
    # per FIRST_PAUSE (a loop without pauses would claim every few tenths of a millisecond).
    bound = 30 + 2 * (recovery + 1.0) / FIRST_PAUSE + chaos.kicker.stats.invocations
    assert claims <= bound, (claims, bound)
    chaos.record("retry_storm", recovery, claims=claims, invocations=chaos.kicker.stats.invocations)


def _log_lines_of(log: Path, job_ids: list[int]) -> str:
    """The workers' log lines that name one of these jobs (their attempts, outcomes, leases)."""
    marks = tuple(f"job {job_id}" for job_id in job_ids)
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    named = [
        line[:400] for line in lines if any(mark + sep in line for mark in marks for sep in " ]:")
    ]
    return f"jobs {job_ids} ran other than 3 times; their log lines:\n" + "\n".join(named)


class BrokenKicker:
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        raise ConnectionError("Lambda is unreachable")

    def wake_at(self, queue: str, when: object) -> None:
        raise ConnectionError("Scheduler is unreachable")


def test_lost_kicks(chaos: Chaos) -> None:
    ids = chaos.enqueue(200, kicker=BrokenKicker())
    assert chaos.statuses(ids) == {"queued": 200}  # committed, kicked by nobody
    recovery = chaos.recover(ids)
    assert chaos.statuses(ids) == {"done": 200}
    chaos.record("lost_kicks", recovery)


def test_slow_worker_is_fenced(chaos: Chaos, dsn: str) -> None:
    """Frozen past its lease, the job goes to a new owner; the thawed worker writes nothing."""
    (job_id,) = chaos.enqueue(1, {"sleep": 1.5}, kicker=BrokenKicker())
    env = {**os.environ, "PGKICK_DEMO_TRACE": str(chaos.traces), "PYTHONPATH": str(ROOT)}
    slow = subprocess.Popen(
        [sys.executable, "-m", "tests.slow_worker", dsn], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        chaos.wait_until([job_id], lambda s: s["running"] == 1)
        slow.send_signal(signal.SIGSTOP)
        time.sleep(1.2)  # the frozen worker's 1 s lease runs out (wall time is the fault here)
        recovery = chaos.recover([job_id])  # reaper re-queues, kicks; a new owner completes
        owned = chaos.jobs([job_id])[0]
        assert (owned["status"], owned["attempts"]) == ("done", 2)
    finally:
        slow.send_signal(signal.SIGCONT)
    out, _ = slow.communicate(timeout=30)
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["lost"], summary["done"]) == (1, 0)  # its late write changed nothing
    assert chaos.jobs([job_id])[0] == owned
    chaos.record("slow_worker", recovery, slow_worker_lost=summary["lost"])


def test_serverless_suspend_and_resume(own_server: EmbeddedPostgres, tmp_path: Path) -> None:
    harness = Chaos(own_server.dsn, tmp_path)
    monitor = AwakeMonitor(
        own_server.dsn,
        window=1.0,
        interval=0.2,
        close_on_suspend=True,
        ignore=frozenset({"chaos-observer", "chaos-reaper"}),
    ).start()
    try:
        first = harness.enqueue(50)
        harness.wait_until(first, lambda s: s.get("done", 0) == 50)
        deadline = time.monotonic() + 20
        while monitor.report.suspends < 1:  # the compute sleeps; its sessions are closed
            assert time.monotonic() < deadline
            time.sleep(0.1)
        own_server.stop("fast")  # and a resuming compute refuses connections for a moment
        threading.Timer(1.0, own_server.start).start()
        kicked = time.monotonic()
        harness.kick()  # the worker retries its connection until the compute is back
        time.sleep(1.5)
        second = harness.enqueue(50)
        harness.wait_until(second, lambda s: s.get("done", 0) == 50)
        recovery = time.monotonic() - kicked
        assert monitor.report.resumes >= 1
        harness.record(
            "serverless_suspend",
            recovery,
            suspends=monitor.report.suspends,
            resumes=monitor.report.resumes,
        )
    finally:
        monitor.stop()
        harness.close()
