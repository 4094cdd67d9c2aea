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
    """One queue's need: a wake-up at `next_run_at` (None: nothing later), a kick or not.

    `unserved`: a claim could take a job now and nobody watches or runs the queue (what a
    kick needs, said of the caller's own queue too, which is never kicked); `swept_at`: the
    statement's now, on the server's clock as `next_run_at` (pgkick.worker.healing's stay)."""

    queue: str
    next_run_at: datetime | None
    kick: bool
    unserved: bool = False
    swept_at: datetime | None = None


class QueueHealing(Database):
    def release_kick(self, queue: str) -> None:
        """Forget a pending kick this caller reserved and could not send (the next producer
        or sweep kicks instead of trusting it): migration 0027's function."""
        self.execute(queries.QUEUE_KICK_RELEASE, queue=queue)

    def heal_plan(self, pending: timedelta, *, skip: str | None = None) -> list[QueuePlan]:
        """Every queue with queued jobs; those to kick now carry a pending kick of this caller's.

        skip: the caller's own queue, never kicked (a worker leaving it just found it empty;
        if a job became due since, that worker claims it again: pgkick.worker.healing)."""
        rows = self.rows(queries.QUEUE_HEAL_PLAN, pending=pending, skip=skip)
        return [
            QueuePlan(str(queue), when, bool(kick), bool(unserved), swept_at)
            for queue, when, kick, unserved, swept_at in rows
        ]
