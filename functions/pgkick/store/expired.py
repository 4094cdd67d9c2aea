"""Expired leases: put back in the queue the jobs whose holder is gone.

Why a base of its own: two roles run it. The reaper (pgkick.worker.reaper) sweeps every
queue on its schedule; a worker kicked to rescue a dead one (pgkick.worker.rescue) sweeps
its own queue, as pgkick_worker, and looks when the leases still held there expire.
`WorkerStore` and `MaintenanceStore` both inherit these two statements, bound here once.
"""

from datetime import datetime
from typing import NamedTuple

from pgkick.connections.db import Database
from pgkick.store import queries


class ReapedJob(NamedTuple):
    """A job whose lease had expired, as the sweep left it: queued again, or failed (its
    last attempt, or an operator's cancel)."""

    id: int
    queue: str
    status: str
    attempts: int


class ExpiredLeases(Database):
    """Re-queue expired leases; find the latest lease still held."""

    def reap_expired(self, queue: str | None = None) -> list[ReapedJob]:
        """Expired leases back to queued (or failed at max_attempts): all, or one queue's."""
        return [ReapedJob(*row) for row in self.rows(queries.JOB_REAP_EXPIRED, queue=queue)]

    def latest_lease(self, queue: str) -> datetime | None:
        """When the last lease held in `queue` expires (None: nothing running)."""
        value = self.one(queries.JOB_LEASE_LATEST_IN_QUEUE, queue=queue)[0]
        return value if isinstance(value, datetime) else None
