"""The reaper: the scheduled safety net that runs slower than the database's suspend window.

Why it exists: kicks can be lost and workers can die mid-job. Every run it
re-queues expired leases (failing them at max_attempts), kicks a worker for
each queue with ready jobs (so a lost kick costs at most one reaper interval),
reports queue health, then purges old finished jobs in batches while its
invocation has time left. It touches the database for a few statements and
closes its connection, so between runs the database may sleep.

Why the report comes first and the purge is bounded: a first purge of a large
table can outlast the function's timeout (120 s); a run cut by the timeout loses
its answer and its metrics, and the oldest-ready-job alarm goes blind. So the
health report is handed out (`on_health`: the handler flushes its metrics) before
any purge, and the purge stops while there is still `PURGE_RESERVE` left, saying
what it left: the next run continues.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from pgkick import config
from pgkick.errors import MisuseError
from pgkick.kick.kickers import Kicker
from pgkick.kick.safety import kick_with_safety, wake_after_failed_kick
from pgkick.store.maintenance import MaintenanceStore
from pgkick.tasks.recurring import TICK_KEYS_KEPT
from pgkick.worker.healing import heal_queues

log = logging.getLogger("pgkick.reaper")


PURGE_RESERVE = timedelta(seconds=15)  # left for the answer after the last purge batch


def reap(
    store: MaintenanceStore,
    kicker: Kicker,
    *,
    retention: timedelta,
    purge_batch: int = 10_000,
    remaining_ms: Callable[[], int] | None = None,
    on_health: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """One run. remaining_ms: the invocation's time left (None: no limit, as `pgkick reap`);
    on_health(report): called with the report before the purge (its purge fields unset).
    A role that may not purge (pgkick_worker) is refused first, MisuseError naming the role
    that may: it would re-queue leases and kick, then fail at the purge."""
    refused = store.reap_refused()
    if refused:
        raise MisuseError(refused)
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
            kick_with_safety(kicker, queue, "reaper", after=config.kick_safety())
            kicked.append(queue)
        except Exception:
            log.exception("reaper could not kick queue %s", queue)
            kick_failures.append(queue)
    woken = book_wakes(store, kicker)
    for queue in kick_failures:  # the plan above reserved their kicks: forget, and wake
        release = partial(store.release_kick, queue)
        after = config.failed_kick_wake()
        if wake_after_failed_kick(kicker, queue, after=after, release=release):
            woken.append(queue)
    report: dict[str, Any] = json_native(
        {
            "requeued": sum(1 for job in reaped if job.status == "queued"),
            "failed": sum(1 for job in reaped if job.status == "failed"),
            "ready": ready,
            "kicked": kicked,
            "kick_failures": kick_failures,
            "woken": woken,
            "queues": store.stats_by_queue(),
            "table": store.table_health(),
        }
    )
    if on_health is not None:
        on_health(report)
    reserve_ms = PURGE_RESERVE.total_seconds() * 1000
    purged, complete = store.purge_while(
        retention,
        batch=purge_batch,
        more=(lambda: True) if remaining_ms is None else (lambda: remaining_ms() > reserve_ms),
    )
    report["purged"] = purged
    report["purge_complete"] = complete
    if not complete:
        log.warning(
            "purge stopped for time after %s jobs: older finished jobs remain for the next run",
            purged,
            extra={"purged": purged},
        )
    # recurring's dedupe keys, kept while a tick can come back even when the retention is 0
    report["purged_ticks"] = store.purge_ticks(retention, TICK_KEYS_KEPT)
    report["purged_starts"] = store.purge_stale_starts()  # rate limits' keys gone quiet
    return report


def book_wakes(store: MaintenanceStore, kicker: Kicker) -> list[str]:
    """Book one wake-up per queue at its earliest run_at still to come, each with its safety
    (pgkick.worker.healing's sweep, without its kicks: every ready queue was kicked above,
    and the plan's reservation marks that kick as on its way)."""
    try:
        healed = heal_queues(
            store, kicker, pending=config.kick_pending(), safety=config.kick_safety(), kick=False
        )
    except Exception:
        log.exception("reaper could not read the queues' next run_at")
        return []
    return healed.woken


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
