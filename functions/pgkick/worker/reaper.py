"""The reaper: the scheduled safety net that runs slower than the database's suspend window.

Why it exists: kicks can be lost and workers can die mid-job. Every run it
re-queues expired leases (failing them at max_attempts), kicks a worker for
each queue with ready jobs (so a lost kick costs at most one reaper interval),
purges old finished jobs in batches, and reports queue health. It touches the
database for a few statements and closes its connection, so between runs the
database may sleep.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pgkick import config
from pgkick.kick.kickers import Kicker
from pgkick.store.maintenance import MaintenanceStore

log = logging.getLogger("pgkick.reaper")


def reap(
    store: MaintenanceStore, kicker: Kicker, *, retention: timedelta, purge_batch: int = 10_000
) -> dict[str, Any]:
    reaped = store.reap_expired()
    for job in reaped:
        log.warning(
            "lease expired: job %s is now %s",
            job.id,
            job.status,
            extra={"job_id": job.id, "queue": job.queue, "attempt": job.attempts},
        )
    ready = store.ready_by_queue()
    kicked, kick_failures = [], []
    for queue in ready:
        try:
            kicker.kick(queue, "reaper")
            kicked.append(queue)
        except Exception:
            log.exception("reaper could not kick queue %s", queue)
            kick_failures.append(queue)
    woken = book_wakes(store, kicker)
    purged = store.purge_finished(retention, batch=purge_batch)
    report: dict[str, Any] = json_native(
        {
            "requeued": sum(1 for job in reaped if job.status == "queued"),
            "failed": sum(1 for job in reaped if job.status == "failed"),
            "ready": ready,
            "kicked": kicked,
            "kick_failures": kick_failures,
            "woken": woken,
            "purged": purged,
            "purged_ticks": store.purge_ticks(retention),  # pgkick.tasks.recurring's dedupe keys
            "queues": store.stats_by_queue(),
            "table": store.table_health(),
        }
    )
    return report


def book_wakes(store: MaintenanceStore, kicker: Kicker) -> list[str]:
    """Book one wake-up per queue at its earliest run_at still to come (pgkick.worker.healing):
    a delayed job whose wake-up was lost then runs on time instead of at the next reap.
    The ready queues were kicked above: the plan's reservation marks that kick as on its way."""
    woken: list[str] = []
    try:
        plans = store.heal_plan(config.kick_pending())
    except Exception:
        log.exception("reaper could not read the queues' next run_at")
        return woken
    for plan in plans:
        if plan.next_run_at is None:
            continue
        try:
            kicker.wake_at(plan.queue, plan.next_run_at)
            woken.append(plan.queue)
        except Exception:
            log.exception("reaper could not book the wake-up of queue %s", plan.queue)
    return woken


def json_native(value: Any) -> Any:
    """The report in JSON's own types: Lambda's runtime marshaller knows no datetime, so a
    datetime in the answer fails the invocation (Runtime.MarshalError) and Lambda retries it.
    Datetimes become ISO 8601 strings, Decimals numbers (an int when whole)."""
    if isinstance(value, dict):
        return {str(key): json_native(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_native(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value
