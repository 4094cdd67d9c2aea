"""The statements behind cancel, snooze and results (and their readers).

Why apart from pgkick.store.worker: they are features on top of the core lifecycle,
not its hot path, and keeping them here keeps each module readable. `JobStore`
inherits them, so the worker, the CLI and `pgkick.tasks.results` keep one store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from pgkick.connections.db import Database
from pgkick.store import queries


class Outcome(NamedTuple):
    """One job's status, stored result (decoded JSON) and last error."""

    status: str
    result: Any
    last_error: str | None


class Snoozed(NamedTuple):
    """A snooze written: due at `run_at`, or `cancelled` (failed, 'cancelled by operator')."""

    run_at: datetime
    cancelled: bool


class OutcomeStatements(Database):
    """Cancel a running job, snooze one, read a job's outcome, enqueue a periodic tick."""

    def cancel_running(
        self, *, ids: list[int] | None, queue: str | None, task: str | None
    ) -> list[tuple[int, str]]:
        """Mark running jobs for cancellation; returns (id, queue) of each marked."""
        rows = self.rows(queries.JOB_CANCEL_RUNNING, ids=ids, queue=queue, task=task)
        return [(row[0], row[1]) for row in rows]

    def extend_checked(self, job_id: int, attempts: int, lease: timedelta) -> tuple[bool, bool]:
        """Extend one lease (fenced): (still held, cancel requested)."""
        rows = self.rows(queries.JOB_EXTEND, id=job_id, attempts=attempts, lease=lease)
        return (True, bool(rows[0][1])) if rows else (False, False)

    def snooze(self, job_id: int, attempts: int, seconds: float) -> Snoozed | None:
        """Back to queued at now + seconds, the attempt given back, or failed if a cancel
        came since the last heartbeat (`cancelled`); None: lease lost."""
        rows = self.rows(queries.JOB_SNOOZE, id=job_id, attempts=attempts, seconds=seconds)
        return Snoozed(run_at=rows[0][0], cancelled=rows[0][1] == "failed") if rows else None

    def enqueue_tick(
        self, name: str, tick_at: datetime, *, queue: str, task: str, payload: str, attempts: int
    ) -> int | None:
        """Insert a periodic tick's job unless this tick was recorded already: its id, or None."""
        rows = self.rows(
            queries.PERIODIC_TICK_ENQUEUE,
            name=name,
            tick_at=tick_at,
            queue=queue,
            task=task,
            payload=payload,
            max_attempts=attempts,
        )
        return int(rows[0][0]) if rows else None

    def purge_ticks(self, retention: timedelta) -> int:
        """Forget periodic ticks older than the retention; returns how many."""
        return self.count(queries.PERIODIC_TICK_PURGE, retention=retention)

    def outcome(self, job_id: int) -> Outcome | None:
        """The job's status, result and last error; None if no such job."""
        rows = self.rows(queries.JOB_OUTCOME, id=job_id)
        return Outcome(*rows[0]) if rows else None
