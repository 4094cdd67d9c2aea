"""`pgkick bench` item `cost`: what a day of three workloads costs in dollars, by system.

Why: a team choosing between pgkick, SQS + Lambda and an always-on worker decides in
dollars, and pgkick's bill is invocations, billed milliseconds, Scheduler fires, secret
reads and the hours a scale-to-zero database stays awake (issue 32). Each workload runs
on the local stack (the stand-in Lambda the bench already uses: AWS's emulator and
runtime client, the real worker, the real producer) at each linger measured, with the
awake monitor watching the database:
- a trickle of 1 job a minute, compressed: `trickle_jobs` jobs `trickle_gap` seconds
  apart. Any gap longer than the linger plays as a minute does (each job its own
  invocation); the day is the run's per-job figures times 1,440;
- 10 jobs a second, steady, for `steady_seconds` in real time, times the day;
- a daily burst of `burst` jobs (20,000 in full runs, 1,000 with --quick), scaled per
  job to 100,000 (its cold starts and its last linger scaled too: an overestimate,
  the larger the smaller the burst measured).
The trickle and the steady load start on a warm environment (one job run first, not
counted), as a running load has one; the burst starts cold, as a daily one does.
Every invocation's duration is the emulator's (init included on a cold start), rounded
up to 1 ms (pgkick_dev.bench.cost_model). The database's awake hours come from the
activity the monitor saw per period and Neon's suspend window. SQS + Lambda and the
always-on worker are models priced from the same measured durations.

Safety wake-ups (pgkick.kick.safety) are switched off in the runs and added to each day
by the model: one per queue and minute in which a kick was sent, a minute later, so a
compressed run (8 "minutes" in 24 s) would coalesce what a real day books 1,440 times.
Each is a CreateSchedule call, a fire, and an invocation that finds the queue served:
billed as the empty invocations measured after each run (warm: a real day's arrive
while its environment is).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pgkick import config
from pgkick.connections.db import Database
from pgkick.producer import after_commit
from pgkick.producer import enqueue as producer
from pgkick_dev import queries as dev_queries
from pgkick_dev.awake.monitor import AwakeMonitor
from pgkick_dev.bench import cost_model as model
from pgkick_dev.bench.figures import percentile
from pgkick_dev.local.kicker import LocalKicker

PROBE_WINDOW = 0.5  # the monitor's window: activity plus half a second, then asleep
TEMPLATE_TIMEOUT_MS = 300_000  # template.yaml: WorkerTimeout's default
REAPER_MS = 1_000  # ASSUMED: the daily reaper's invocation, a cold start (not measured here)
# A safety is booked at its kick plus PGKICK_KICK_SAFETY_MS (60 s), rounded up to Scheduler's
# minute (pgkick.kick.kickers.first_minute): 60 to 120 s after the kick, 90 on average (it was
# at least 65 s ahead until the wake-up's first try moved to its own minute: 95)
SAFETY_AFTER_S = 90.0
EMPTY_KICKS = 3  # empty invocations timed after each run: what a safety's costs
CONCURRENCY = 4  # the stand-in's environments (the template reserves none: a 2-core machine)
PER_DAY = {"trickle": 1_440, "steady": 864_000, "burst": 100_000}
LABELS = {
    "trickle": "trickle, 1 job a minute",
    "steady": "steady, 10 jobs/s",
    "burst": "daily burst of 100,000",
}


@dataclass(frozen=True)
class CostSizes:
    trickle_jobs: int = 8
    trickle_gap: float = 3.0  # real seconds standing for a minute
    steady_seconds: float = 20.0
    burst: int = 20_000  # scaled per job to 100,000 (a drain of 100,000 here: minutes a linger)
    lingers: tuple[int, ...] = (0, 250, 1000)  # PGKICK_WORKER_LINGER_MS measured


def measure(dsn: str, kind: str, linger_ms: int, sizes: CostSizes, log: Path) -> dict[str, Any]:
    """One workload at one linger on fresh environments: what the stand-in and the
    database saw, unscaled; safeties off, here and in the workers (added by pgkick_day)."""
    with config.overriding(kick_safety=timedelta(0)):
        return _measure(dsn, kind, linger_ms, sizes, log)


def _measure(dsn: str, kind: str, linger_ms: int, sizes: CostSizes, log: Path) -> dict[str, Any]:
    with Database.open(dsn, application_name="pgkick-bench") as db:
        db.execute(dev_queries.JOB_TRUNCATE_ALL)
        db.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    local = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PGKICK_WORKER_LINGER_MS": str(linger_ms),
            "PGKICK_KICK_SAFETY_MS": "0",
        },
        concurrency=CONCURRENCY,
        timeout_ms=TEMPLATE_TIMEOUT_MS,
        output=log,
    )
    since, warm_starts = 0.0, 0
    if kind != "burst":  # a running trickle has a warm environment: its start is not per job
        producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=local)
        local.wait_idle(120, include_wakes=True)
        with Database.open(dsn, application_name="pgkick-bench") as db:
            db.execute(dev_queries.JOB_TRUNCATE_ALL)
        since, warm_starts = time.time(), local.stats.cold_starts
    monitor = AwakeMonitor(dsn, window=PROBE_WINDOW, interval=0.1).start()
    try:
        started, kicks = time.monotonic(), after_commit.stats.kicks
        jobs = _play(dsn, kind, sizes, local)
        local.wait_idle(1_800, include_wakes=True)
        seconds, kicks = time.monotonic() - started, after_commit.stats.kicks - kicks
    finally:
        awake = monitor.stop()
    try:
        until = time.time()
        empty = _empty_invocations(local)
    finally:
        local.close()
    # the workload's events, not the empty kicks' that follow it
    events = [e for e in local.timeline.events(since=since, limit=1_000_000) if e["at"] < until]
    durations = [float(e["duration_ms"]) for e in events if e["kind"] == "invoke_end"]
    kinds = [e["kind"] for e in events]
    with Database.open(dsn, application_name="pgkick-bench") as db:
        rows = db.dicts(dev_queries.JOB_LATENCY_ALL)
    waits = [float(r["wait_ms"]) for r in rows if r["wait_ms"] is not None]
    return {
        "workload": kind,
        "linger_ms": linger_ms,
        "jobs": jobs,
        "seconds": round(seconds, 2),
        "invocations": len(durations),
        "cold_starts": local.stats.cold_starts - warm_starts,
        "billed_ms": sum(model.billed_ms(d) for d in durations),
        # the longest ones, as many as environments started: those cold starts paid
        "billed_ms_cold": sum(
            model.billed_ms(d)
            for d in sorted(durations, reverse=True)[: local.stats.cold_starts - warm_starts]
        ),
        "duration_p50_ms": percentile(durations, 0.5),
        "duration_max_ms": percentile(durations, 1.0),
        "kicks": kicks,  # the producer's: each books a safety on a real day
        "empty_ms": percentile(empty, 0.5),  # an invocation of a served queue: a safety's
        "schedules_created": kinds.count("schedule_create"),
        "schedules_fired": kinds.count("schedule_fire"),
        "awake_seconds": round(awake.awake_seconds, 2),
        "commit_to_claim_p50_ms": percentile(waits, 0.5),
        "commit_to_claim_p99_ms": percentile(waits, 0.99),
        "exactly_once": len(rows) == jobs
        and all(r["status"] == "done" and r["attempts"] == 1 for r in rows),
    }


def _empty_invocations(local: LocalKicker) -> list[float]:
    """Durations of EMPTY_KICKS kicks of the served queue, one at a time, on the warm
    environment the workload left: what each safety wake-up's invocation is billed."""
    durations = []
    for _ in range(EMPTY_KICKS):
        since = time.time()
        local.kick("default", "wake")
        local.wait_idle(120)
        ends = local.timeline.events(since=since, limit=100)
        durations += [float(e["duration_ms"]) for e in ends if e["kind"] == "invoke_end"]
    return durations


def _play(dsn: str, kind: str, sizes: CostSizes, local: LocalKicker) -> int:
    """Send the workload's jobs; returns how many."""
    if kind == "burst":
        jobs = [{"payload": {}, "task": "noop"}] * sizes.burst
        producer.enqueue_many(jobs, dsn=dsn, kicker=local)
        return sizes.burst
    gap = sizes.trickle_gap if kind == "trickle" else 0.1
    count = sizes.trickle_jobs if kind == "trickle" else round(10 * sizes.steady_seconds)
    start = time.monotonic()
    for i in range(count):
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=local)
    return count


def pgkick_day(run: dict[str, Any], memory_mb: int, suspend_s: float) -> model.Day:
    """A run scaled to its workload's day, with its safety wake-ups and the daily reaper
    (an invocation, a Scheduler fire and, when the database would sleep, one suspend
    window) added."""
    kind, jobs = run["workload"], run["jobs"]
    scale = PER_DAY[kind] / jobs
    kicks = run["kicks"] * scale
    if kind == "trickle":  # each job a period of a minute: the activity the monitor saw
        hours = model.awake_hours(60.0, _active(run, periods=jobs), suspend_s)
        busy, minutes = model.DAY, PER_DAY[kind]  # each job's kick in a minute of its own
    elif kind == "steady":
        hours, busy, minutes = 24.0, model.DAY, 1_440
    else:  # the safety comes after the burst's activity, or during its last minute
        active = max(_active(run, periods=1) * scale, SAFETY_AFTER_S + run["empty_ms"] / 1000)
        hours = model.awake_hours(model.DAY, active, suspend_s)
        busy = run["seconds"] * scale
        minutes = math.ceil(busy / 60)
    hours = min(24.0, hours + (suspend_s / 3600 if hours < 24 else 0.0))  # the reaper's run
    cold = max(1, run["cold_starts"])  # a running load's environment started once, at least
    invocations = round(run["invocations"] * scale)
    billed = round(run["billed_ms"] * scale)
    if kind != "burst":  # cold starts once a day, not once per run: the rest scales
        invocations = round((run["invocations"] - run["cold_starts"]) * scale) + cold
        billed = round((run["billed_ms"] - run["billed_ms_cold"]) * scale + run["billed_ms_cold"])
        if run["duration_max_ms"] >= 0.8 * run["seconds"] * 1000:  # one worker ran throughout:
            # it hands over before its timeout, so a day is that many invocations, no more
            per_day = math.ceil(model.DAY * 1000 / TEMPLATE_TIMEOUT_MS)
            invocations = min(invocations, max(1, run["invocations"]) * per_day)
            kicks = per_day  # no producer kicks a watched queue; each hand-over is a kick
    # no invocation is billed past its timeout (a run's last linger, scaled, would be)
    billed = min(billed, invocations * TEMPLATE_TIMEOUT_MS)
    calls = invocations  # the worker's, each booking rescues as measured
    safeties = model.safeties(kicks, minutes)
    invocations += safeties + 1  # and the daily reaper
    return model.Day(
        system=f"pgkick, linger {run['linger_ms']} ms",
        jobs=PER_DAY[kind],
        invocations=invocations,
        billed_ms=billed + safeties * model.billed_ms(run["empty_ms"]) + REAPER_MS,
        memory_mb=memory_mb,
        scheduler_invocations=round(run["schedules_fired"] * scale) + safeties + 1,
        # the schedules workers booked (rescues), as many per invocation as measured,
        # and the safeties
        scheduler_calls=round(run["schedules_created"] / max(1, run["invocations"]) * calls)
        + safeties,
        secret_calls=model.secret_calls(invocations, cold, busy, cold),
        database_hours=round(hours, 3),
    )


def _active(run: dict[str, Any], *, periods: int) -> float:
    """Seconds of activity per period: the monitor's awake time less its own window."""
    return max(0.0, float(run["awake_seconds"]) / periods - PROBE_WINDOW)


def run(dsn: str, sizes: CostSizes, log: Path, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every workload at every linger (lingers in turn within a workload, so the machine's
    drift falls on all of them alike)."""
    rows = []
    for kind in PER_DAY:
        for linger_ms in sizes.lingers:
            rows.append(measure(dsn, kind, linger_ms, sizes, log))
            say(f"cost: {rows[-1]}")
    return rows
