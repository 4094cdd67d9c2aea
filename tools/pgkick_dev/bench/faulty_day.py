"""`quiet_day`'s faulted day: drops, duplicates and throttles injected, and no reaper at all.

Why: issue #30 asks that no job wait for the backstop. This plays a compressed day of
small bursts on three queues, each burst some jobs ready now and some delayed, on the
local stack with its fault flags on: 20% of the worker's events lost silently (kicks and
wake-ups: --drop-rate), 20% delivered twice (--duplicate-rate), 20% of the schedules'
deliveries refused and retried (--schedule-delivery-failure-rate), and one execution
environment, so bursts on different queues throttle each other. The reaper never runs:
whatever is not done at the end of the day waited for it. Reported: jobs done, jobs
claimed more than once, jobs not done, and the worst wait from a job's run_at to its end,
in real seconds and in the day's scaled minutes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pgkick.producer import enqueue as producer
from pgkick.store.maintenance import MaintenanceStore
from pgkick_dev import queries as dev_queries
from pgkick_dev.local.kicker import LocalKicker

DAY = 86_400.0
QUEUES = ("mail", "billing", "reports")
BURSTS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85)  # of the day


def play(dsn: str, seconds: float, env: dict[str, str], log: Path) -> dict[str, Any]:
    scale = seconds / DAY
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
        store.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    local = LocalKicker(
        env=env,
        concurrency=1,  # bursts on three queues at once: throttled, backing off
        timeout_ms=2_000,
        idle_seconds=seconds,
        retry_delays=(60 * scale, 120 * scale),
        throttle_backoff=(1 * scale, 300 * scale),
        fast_scheduler=True,  # the compressed day's wake-ups at the second (labelled)
        duplicate_rate=0.2,
        drop_rate=0.2,
        seed=11,
        output=log,
    )
    local.stack.scheduler.faults.delivery_failure_rate = 0.2
    started = time.monotonic()
    for n, at in enumerate(BURSTS):
        time.sleep(max(0.0, started + at * seconds - time.monotonic()))
        _burst(dsn, local, QUEUES[n % len(QUEUES)], delay=600 * scale)
    time.sleep(max(0.0, started + seconds - time.monotonic()))
    local.wait_idle(30, include_wakes=True)
    stats = local.stats
    local.close()
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        done, again, not_done, worst = store.one(dev_queries.JOB_DELAY_SUMMARY)
    return {
        "jobs": done + not_done,
        "done": done,
        "claimed_more_than_once": again,
        "not_done_waiting_for_the_reaper": not_done,
        "worst_delay_s": round(worst, 2),
        "worst_delay_scaled_minutes": round(worst / scale / 60, 1),
        "injected_drops": stats.injected_drops,
        "duplicates": stats.duplicates,
        "throttles": stats.throttles,
        "schedule_retries": sum(
            1 for e in local.stack.timeline.events(limit=100_000) if e["kind"] == "schedule_retry"
        ),
        "invocations": stats.invocations,
    }


def _burst(dsn: str, local: LocalKicker, queue: str, *, delay: float) -> None:
    now: list[dict[str, Any]] = [{"payload": {}, "task": "noop", "queue": queue}] * 5
    later: list[dict[str, Any]] = [
        {"payload": {}, "task": "noop", "queue": queue, "delay": delay}
    ] * 5
    producer.enqueue_many(now + later, dsn=dsn, kicker=local)
