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
from datetime import timedelta
from typing import Any

from pgkick.kick import Kicker
from pgkick.store import JobStore

log = logging.getLogger("pgkick.reaper")


def reap(
    store: JobStore, kicker: Kicker, *, retention: timedelta, purge_batch: int = 10_000
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
    purged = store.purge_finished(retention, batch=purge_batch)
    return {
        "requeued": sum(1 for job in reaped if job.status == "queued"),
        "failed": sum(1 for job in reaped if job.status == "failed"),
        "ready": ready,
        "kicked": kicked,
        "kick_failures": kick_failures,
        "purged": purged,
        "queues": store.stats_by_queue(),
        "table": store.table_health(),
    }
