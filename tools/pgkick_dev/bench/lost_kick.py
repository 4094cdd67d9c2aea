"""`pgkick bench` item `quiet_day`'s lost kicks in real time: how long after its commit a job
whose kick failed runs, with Scheduler as faithful as the stand-in makes it.

Why beside the compressed day: that day scales its timers (a minute is 33 ms there) but not
what cannot be scaled: a one-time schedule's at() names a whole second and Scheduler fires
within its minute, and a new environment starts in real time. A lost kick's wait there is
mostly those, multiplied by the compression (0.5 s real reads as 15 "scaled minutes"), so it
said nothing about the 2 minutes a user would wait. Here nothing is compressed: the
producer's kick raises, it books its wake-up as it would on AWS (PGKICK_FAILED_KICK_WAKE_MS
out, at the minute, at least 5 s ahead: pgkick.kick.kickers.first_minute), the stand-in's
Scheduler fires it at a moment within that minute (60 s precision, as AWS documents), and the
worker starts cold or warm as the local stack has it. Each sample is its own queue, so its
booking, firing and invocation are read from the stack's timeline without ambiguity, and
the samples run one after the other: a worker leaving sweeps every queue and kicks those
with ready jobs (pgkick.worker.healing), so a second lost kick committed meanwhile would be
run by that sweep, not by its own wake-up. Which invocation ran each job is reported
(`served_by`: the kick's reason, `wake` for its wake-up). About a minute a sample."""

from __future__ import annotations

import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

from pgkick import config
from pgkick.kick.kickers import WAKE_MARGIN
from pgkick.producer import enqueue as producer
from pgkick.store.maintenance import MaintenanceStore
from pgkick_dev.local.kicker import LocalKicker

TWO_MINUTES = 120.0


class FailingKicks:
    """The app's kicker with the network down: kicks raise, wake-ups still get booked."""

    def __init__(self, local: LocalKicker) -> None:
        self.local = local

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        raise ConnectionError("Lambda unreachable")

    def wake_at(self, queue: str, when: datetime) -> None:
        self.local.wake_at(queue, when)

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        self.local.book_rescue(queue, when, name)

    def cancel_rescue(self, name: str) -> None:
        self.local.cancel_rescue(name)


def run(
    dsn: str,
    log: Path,
    *,
    samples: int,
    fast_scheduler: bool = False,
    timeout: float = 300.0,
) -> dict[str, Any]:
    """`samples` jobs, one after the other, each committed with a kicker that raises; for
    each, the seconds from its commit to its wake-up's booked minute, to the firing, to the
    invocation's start (cold or warm) and to the job's finish. `fast_scheduler` (tests
    only, labelled): wake-ups at the second, so a sample takes seconds, not minutes; the
    producer's own PGKICK_FAILED_KICK_WAKE_MS (this process's environment) sets the delay."""
    local = LocalKicker(
        env={"DATABASE_URL": dsn, "PGKICK_TASKS": "pgkick_dev.tasks"},
        concurrency=2,
        fast_scheduler=fast_scheduler,
        output=log,
    )
    out: list[dict[str, Any]] = []
    try:
        for n in range(samples):
            queue = f"lost-kick-{n + 1}"
            job_id = producer.enqueue_and_kick(
                {}, task="noop", queue=queue, dsn=dsn, kicker=FailingKicks(local)
            )
            # its wake-up (booked before enqueue_and_kick returned) fired, the job ran, its
            # worker's rescue is gone: nothing runs or waits
            local.wait_idle(timeout, include_wakes=True)
            out.append(_sample(queue, _row(dsn, job_id), local.timeline.events(limit=10_000)))
    finally:
        local.close()
    waits = [s["commit_to_finish_s"] for s in out if s.get("commit_to_finish_s") is not None]
    # What no handful of samples shows: the booked minute is the first whole minute at least
    # max(the failed kick's wake, WAKE_MARGIN) out, and Scheduler fires within it
    earliest = max(config.app_settings().failed_kick_wake, WAKE_MARGIN)
    bound = None if fast_scheduler else [earliest.total_seconds(), earliest.total_seconds() + 120]
    return {
        "scheduler": "at the second (fast, labelled)" if fast_scheduler else "at the minute",
        "design_bound_s": bound,  # commit to firing, before the invocation's start
        "samples": out,
        "finished": len(waits),
        "p50_s": round(statistics.median(waits), 3) if waits else None,
        "max_s": round(max(waits), 3) if waits else None,
        "within_2_min": sum(w <= TWO_MINUTES for w in waits),
    }


def _row(dsn: str, job_id: int) -> dict[str, Any] | None:
    with MaintenanceStore.open(dsn, application_name="pgkick-bench") as store:
        rows = store.get_many([job_id])
    return rows[0] if rows else None


def _sample(queue: str, row: dict[str, Any] | None, events: list[dict[str, Any]]) -> dict[str, Any]:
    """One lost kick's wait, phase by phase, from its row and its queue's timeline."""
    if row is None or row["finished_at"] is None:
        return {"queue": queue, "commit_to_finish_s": None, "status": row and row["status"]}
    commit = row["created_at"].timestamp()
    mine = [e for e in events if e["queue"] == queue and e["at"] >= commit]
    fire = next((e for e in mine if e["kind"] == "schedule_fire"), None)
    start = next((e for e in mine if e["kind"] == "invoke_start"), None)  # whatever sent it
    due = datetime.fromisoformat(fire["detail"].rsplit(" due ", 1)[1]).timestamp() if fire else None

    def since_commit(at: float | None) -> float | None:
        return None if at is None else round(at - commit, 3)

    return {
        "queue": queue,
        "commit_to_booked_minute_s": since_commit(due),
        "commit_to_fire_s": since_commit(fire["at"] if fire else None),
        "commit_to_invoke_s": since_commit(start["at"] if start else None),
        "cold": start["cold"] if start else None,
        "served_by": start["reason"] if start else None,  # "wake": its own wake-up
        "commit_to_finish_s": since_commit(row["finished_at"].timestamp()),
    }
