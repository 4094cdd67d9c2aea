"""`pgkick bench` item `quiet_day`: a compressed day with few jobs, a crash and a lost kick.

Why: the reaper used to run hourly because it was the only rescue for a crashed
worker and a lost kick, and each run keeps a serverless database awake for a
whole suspend window (1/6 of a quiet day). Rescues now come from the workers'
own wake-ups (pgkick.worker.rescue) and from the failed kick's wake-up, so the reaper
can run daily. This plays a day compressed to `seconds` (the suspend window,
the linger, retries and the failed kick's wake-up scaled alike; leases and cold
starts stay real) three times: no jobs with an hourly reaper, no jobs with a
daily one (the reaper's share of the day), and a day of bursts with a worker
SIGKILLed mid-job and a kick that fails, with the daily reaper: how long each
stranded job waited, and how much of the day the compute was awake.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pgkick.producer import enqueue as producer
from pgkick.store.maintenance import MaintenanceStore
from pgkick.worker.reaper import reap
from pgkick_dev import queries as dev_queries
from pgkick_dev.awake.monitor import AwakeMonitor
from pgkick_dev.bench.lost_kick import FailingKicks
from pgkick_dev.local.kicker import LocalKicker

DAY = 86_400.0
WINDOW = 600.0  # a 10-minute suspend window (Relyt One)
# A kick's safety wake-up comes a minute after it on AWS, long after the kick's worker
# (a cold start: about a second) has run. Scaled alone it would fire 33 ms after the kick,
# while that worker still starts (cold starts are not scaled): two cold starts at once
# under a 2 s timeout. So it keeps a real floor, as leases do.
SAFETY_FLOOR_MS = 3_000


@dataclass(frozen=True)
class QuietDay:
    seconds: float = 48.0  # the day, compressed: 1 s stands for 30 minutes
    jobs_per_burst: int = 20

    def scaled(self, real_seconds: float) -> float:
        return real_seconds * self.seconds / DAY


def run(dsn: str, day: QuietDay, log: Path, say: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {"day_seconds": day.seconds, "window_seconds": day.scaled(WINDOW)}
    for label, reapers, jobs in (("hourly reaper", 24, False), ("daily reaper", 1, False)):
        out[label] = _play(dsn, day, log, reapers=reapers, jobs=jobs)
        say(f"quiet day, no jobs, {label}: {out[label]}")
    out["a day with a crash and a lost kick"] = _play(dsn, day, log, reapers=1, jobs=True)
    say(f"quiet day with jobs: {out['a day with a crash and a lost kick']}")
    out["a day with drops, duplicates and throttles, no reaper"] = _faulted(dsn, day, log)
    say(f"quiet day with faults: {out['a day with drops, duplicates and throttles, no reaper']}")
    return out


def _faulted(dsn: str, day: QuietDay, log: Path) -> dict[str, Any]:
    """The faulted day (pgkick_dev.bench.faulty_day), with this day's scaled settings."""
    from pgkick_dev.bench import faulty_day

    scaled = {
        "PGKICK_WORKER_LINGER_MS": str(max(1, round(day.scaled(1000)))),
        "PGKICK_FAILED_KICK_WAKE_MS": str(round(day.scaled(60_000))),
        "PGKICK_KICK_SAFETY_MS": str(max(round(day.scaled(60_000)), SAFETY_FLOOR_MS)),
        "PGKICK_PRODUCER_LINGER_MS": "0",
    }
    env = {
        "DATABASE_URL": dsn,
        "PGKICK_TASKS": "pgkick_dev.tasks",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "PGKICK_LEASE_SECONDS": "1",
        "PGKICK_LEASE_MARGIN_SECONDS": "1",
        "PGKICK_MIN_REMAINING_MS": "200",
        "PGKICK_WATCH_SECONDS": "1",
        "PGKICK_KICK_PENDING_MS": "500",  # a lost kick's reservation lapses within the day
        **scaled,
    }
    with _environment({**scaled, "PGKICK_KICK_PENDING_MS": "500"}):
        return faulty_day.play(dsn, day.seconds, env, log)


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """This process's producer settings for the day (restored after)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _play(dsn: str, day: QuietDay, log: Path, *, reapers: int, jobs: bool) -> dict[str, Any]:
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
        store.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    scaled = {
        "PGKICK_WORKER_LINGER_MS": str(max(1, round(day.scaled(1000)))),
        "PGKICK_FAILED_KICK_WAKE_MS": str(round(day.scaled(60_000))),
        "PGKICK_KICK_SAFETY_MS": str(max(round(day.scaled(60_000)), SAFETY_FLOOR_MS)),
        "PGKICK_PRODUCER_LINGER_MS": "0",  # a lingering second would be half an hour here
    }
    local = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "PGKICK_TASKS": "pgkick_dev.tasks",  # sleep, killed mid-job for the rescue
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_LEASE_SECONDS": "1",
            "PGKICK_LEASE_MARGIN_SECONDS": "1",
            "PGKICK_MIN_REMAINING_MS": "200",
            "PGKICK_WATCH_SECONDS": "1",  # the shortest: a dead worker's lapses soonest
            **scaled,
        },
        concurrency=2,
        timeout_ms=2_000,
        idle_seconds=day.seconds,  # warm environments, as a warm Lambda's
        retry_delays=(day.scaled(60), day.scaled(120)),
        throttle_backoff=(day.scaled(1), day.scaled(300)),
        fast_scheduler=True,  # the labelled kindness: the compressed day's wake-ups at the second
        output=log,
    )
    window = day.scaled(WINDOW)
    monitor = AwakeMonitor(
        dsn, window=window, interval=window / 4, close_on_suspend=False, ignore=frozenset()
    )
    events: list[tuple[float, Callable[[], None]]] = [
        ((k + 0.5) / reapers, lambda: _reap(dsn, local)) for k in range(reapers)
    ]
    stranded: dict[str, Any] = {}
    if jobs:
        events += [(at, lambda: _burst(dsn, day, local)) for at in (0.2, 0.45, 0.7)]
        events += [(0.3, lambda: stranded.update(crash=_crash(dsn, local)))]
        events += [(0.55, lambda: stranded.update(lost_kick=_lost_kick(dsn, local)))]
    with _environment(scaled):
        started = time.monotonic()
        monitor.start()
        for at, event in sorted(events, key=lambda e: e[0]):
            time.sleep(max(0.0, started + at * day.seconds - time.monotonic()))
            event()
        time.sleep(max(0.0, started + day.seconds - time.monotonic()))
        report = monitor.stop()
    local.wait_idle(30, include_wakes=True)
    local.close()
    # the emulator starts on an awake compute: its first window is nobody's doing
    caused = max(0.0, report.awake_seconds - window) / day.seconds
    row: dict[str, Any] = {
        "awake_fraction": round(report.awake_fraction, 4),
        "awake_fraction_after_first_window": round(caused, 4),
        "suspends": report.suspends,
        "invocations": local.stats.invocations,
        "crashes": local.stats.crashes,
        "timeouts": local.stats.timeouts,
        "rescued": sum(r.get("rescued", 0) for r in local.stats.results if isinstance(r, dict)),
    }
    if jobs:
        row.update(_waits(dsn, day, stranded))
    return row


def _reap(dsn: str, local: LocalKicker) -> None:
    with MaintenanceStore.open(dsn, application_name="pgkick-reaper") as store:
        reap(store, local, retention=timedelta(days=7))


def _burst(dsn: str, day: QuietDay, local: LocalKicker) -> None:
    jobs = [{"payload": {}, "task": "noop"} for _ in range(day.jobs_per_burst)]
    producer.enqueue_many(jobs, dsn=dsn, kicker=local)


def _crash(dsn: str, local: LocalKicker) -> dict[str, Any]:
    """A job whose worker is SIGKILLed while it runs: its rescue wake-up must bring it back.

    Killed once the rescue is booked, not merely once the job is claimed: a worker killed
    in the half second before its rescue is booked (the boto3 import on a cold start)
    leaves its job to the sweep or the reaper, a known gap (docs/concepts/kicks.md) that
    made this day's result depend on when the kill fell (a job left running at the end)."""
    job_id = producer.enqueue_and_kick({"seconds": 1.0}, task="sleep", dsn=dsn, kicker=local)
    deadline = time.monotonic() + 10
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        while not (row := store.get_many([job_id])[0])["locked_until"] or not local.rescues():
            if time.monotonic() > deadline:
                return {"id": job_id, "error": "never started"}
            time.sleep(0.01)
    for pid in local.processes():
        os.kill(pid, signal.SIGKILL)
    return {"id": job_id, "killed_at": datetime.now(UTC), "lease_end": row["locked_until"]}


def _lost_kick(dsn: str, local: LocalKicker) -> dict[str, Any]:
    job_id = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=FailingKicks(local))
    return {"id": job_id}


def _waits(dsn: str, day: QuietDay, stranded: dict[str, Any]) -> dict[str, Any]:
    """How long each stranded job waited: the crashed one past its lease's expiry (the
    worker's whole lease, as its rescue is booked for), the lost kick's from its commit."""
    crash, lost = stranded.get("crash", {}), stranded.get("lost_kick", {})
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        rows = {r["id"]: r for r in store.get_many([crash.get("id", 0), lost.get("id", 0)])}
        counts = {row[0]: row[1] for row in store.rows(dev_queries.JOB_COUNT_BY_STATUS)}
    out: dict[str, Any] = {"jobs_by_status": counts}
    crashed = rows.get(crash.get("id", 0))
    if crashed and crashed["finished_at"] and "lease_end" in crash:
        # started again after its lease ended: what the rescue cost beyond the lease, in
        # real seconds (leases, the announcement's life and cold starts are not scaled)
        late = (crashed["claimed_at"] - crash["lease_end"]).total_seconds()
        out["crash_restarted_after_lease_s"] = round(late, 3)
        out["crash_attempts"] = crashed["attempts"]
    lost_row = rows.get(lost.get("id", 0))
    if lost_row and lost_row["finished_at"]:
        waited = (lost_row["finished_at"] - lost_row["created_at"]).total_seconds()
        out["lost_kick_waited_s"] = round(waited, 3)
        out["lost_kick_waited_scaled_minutes"] = round(waited * DAY / day.seconds / 60, 1)
    return out
