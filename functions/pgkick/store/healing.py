"""The self-healing sweep's statement: which queues need a wake-up, and which a kick.

Why a base of its own: two roles run it. A worker that exits (pgkick.worker.healing) and
the reaper (pgkick.worker.reaper) both look, in one statement, at every queue with queued
jobs: the earliest run_at still to come gets one wake-up per queue (not one per job), and a
queue with a ready job that nobody watches gets a kick, reserved as a producer reserves one
(pgkick.kick.watch), so that a lost kick or a lost wake-up is healed by the next worker to
exit rather than by the daily reaper. `WorkerStore` and `MaintenanceStore` both inherit it.
"""

from datetime import datetime, timedelta
from typing import NamedTuple

from pgkick.connections.db import Database
from pgkick.store import queries


class QueuePlan(NamedTuple):
    """One queue's need: a wake-up at `next_run_at` (None: nothing later), a kick or not."""

    queue: str
    next_run_at: datetime | None
    kick: bool


class QueueHealing(Database):
    def release_kick(self, queue: str) -> None:
        """Forget a pending kick this caller reserved and could not send (the next producer
        or sweep kicks instead of trusting it): migration 0027's function."""
        self.execute(queries.QUEUE_KICK_RELEASE, queue=queue)

    def heal_plan(self, pending: timedelta, *, skip: str | None = None) -> list[QueuePlan]:
        """Every queue with queued jobs; those to kick now carry a pending kick of this caller's.

        skip: the caller's own queue, never kicked (a worker leaving it just found it empty)."""
        rows = self.rows(queries.QUEUE_HEAL_PLAN, pending=pending, skip=skip)
        return [QueuePlan(str(queue), when, bool(kick)) for queue, when, kick in rows]
