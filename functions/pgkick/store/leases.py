"""The leases a worker holds: pushed forward while its jobs run, and read for an operator's
cancel, every statement fenced by the job's attempt.

Why a base of its own: the lease keeper's thread (pgkick.worker.lease) sends these on the
worker's connection between the batch's own statements, and only these; `WorkerStore`
inherits them, bound here once. A row that no longer matches (id, attempts) is a lease
lost: the job is someone else's, and the caller stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from pgkick.connections.db import Database
from pgkick.store import queries

if TYPE_CHECKING:
    from pgkick.store.worker import ClaimedJob


class HeldLeases(Database):
    """Extend one lease or a batch's; read which held jobs an operator asked to cancel."""

    def extend(self, job_id: int, attempts: int, lease: timedelta) -> bool:
        """True if the lease was pushed forward; False means stop: the job is someone else's."""
        return self.extend_checked(job_id, attempts, lease)[0]

    def extend_checked(self, job_id: int, attempts: int, lease: timedelta) -> tuple[bool, bool]:
        """Extend one lease (fenced): (still held, cancel requested)."""
        rows = self.rows(queries.JOB_EXTEND, id=job_id, attempts=attempts, lease=lease)
        return (True, bool(rows[0][1])) if rows else (False, False)

    def extend_many(self, jobs: Sequence[ClaimedJob], lease: timedelta) -> dict[int, bool]:
        """Extend a batch's leases in one statement; returns the ids this worker still holds,
        each with whether an operator asked to cancel it (`pgkick cancel`)."""
        rows = self.rows(
            queries.JOB_EXTEND_MANY,
            ids=[j.id for j in jobs],
            attempts=[j.attempts for j in jobs],
            lease=lease,
        )
        return {row[0]: row[1] for row in rows}

    def cancel_requested(self, jobs: Sequence[ClaimedJob]) -> set[int]:
        """The held jobs (fenced by attempt) an operator asked to cancel: a read, no write."""
        rows = self.rows(
            queries.JOB_CANCEL_REQUESTED_AMONG,
            ids=[j.id for j in jobs],
            attempts=[j.attempts for j in jobs],
        )
        return {row[0] for row in rows}
