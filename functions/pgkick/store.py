"""The queue's statements as Python: insert, claim, complete, fail, extend, reap, purge.

Why one class: the worker loop, the producer, the reaper and the CLI are plain
Python over a `JobStore`, so the rules (fencing, batching, the injected clock)
live in one place, and the SQL itself lives in `sql/` (bundled as
`pgkick.queries`). Connections and execution are `pgkick.db`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, LiteralString, NamedTuple

from pgkick import queries
from pgkick.db import Clock, Connection, Database, DatabaseUnavailable, connect, server_clock
from pgkick.validation import JobSpec

__all__ = [
    "ClaimedJob",
    "Clock",
    "Connection",
    "DatabaseUnavailable",
    "FailOutcome",
    "JobStore",
    "QueuedJob",
    "ReapedJob",
    "connect",
    "server_clock",
]


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job this worker holds under a lease; `attempts` is the fencing token."""

    id: int
    queue: str
    task: str
    payload: Any
    attempts: int
    max_attempts: int


class QueuedJob(NamedTuple):
    """A job just inserted: its id and when it is due (for the kick or the wake-up).

    A tuple, not a dataclass: enqueue_many makes 100,000 of them at a time."""

    id: int
    queue: str
    run_at: datetime


@dataclass(frozen=True, slots=True)
class FailOutcome:
    """What a fail did: nothing (lease lost), a retry at run_at, or a final failure."""

    owned: bool
    queue: str | None = None
    status: str | None = None
    run_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ReapedJob:
    id: int
    queue: str
    status: str
    attempts: int


class JobStore(Database):
    """The queue's statements: what the producer, the worker, the reaper and the CLI run."""

    # -- producer ---------------------------------------------------------------
    def insert(self, spec: JobSpec) -> QueuedJob:
        row = self.one(
            queries.JOB_INSERT,
            queue=spec.queue,
            task=spec.task,
            payload=spec.payload_json,
            run_at=spec.run_at,
            delay=spec.delay,
            max_attempts=spec.max_attempts,
        )
        return QueuedJob._make(row)

    def insert_many(self, chunks: Iterable[Sequence[JobSpec]]) -> list[QueuedJob]:
        """Insert chunk after chunk in one transaction and one pipeline; jobs in input order.

        Why chunks in a pipeline: the server inserts one chunk while the caller
        validates the next (two cores at work, not one after the other). An
        exception from the chunks' iterator rolls everything back.
        """
        sent = []
        with self.transaction(), self.pipeline():
            for specs in chunks:
                sent.append(
                    self.execute(
                        queries.JOB_INSERT_MANY,
                        queues=[s.queue for s in specs],
                        tasks=[s.task for s in specs],
                        payloads=[s.payload_json for s in specs],
                        run_ats=[s.run_at for s in specs],
                        delays=[s.delay.total_seconds() for s in specs],  # float8: cheap
                        max_attempts=[s.max_attempts for s in specs],
                    )
                )
            return [QueuedJob._make(row) for cursor in sent for row in cursor.fetchall()]

    # -- worker -----------------------------------------------------------------
    def claim(self, queue: str, *, batch: int, lease: timedelta) -> list[ClaimedJob]:
        rows = self.rows(queries.JOB_CLAIM, queue=queue, batch=batch, lease=lease)
        return [ClaimedJob(*row) for row in rows]

    def complete(self, job_id: int, attempts: int) -> bool:
        """True if this attempt still held the job and it is now done."""
        return self.count(queries.JOB_COMPLETE, id=job_id, attempts=attempts) == 1

    def complete_many(self, jobs: Sequence[ClaimedJob]) -> set[int]:
        """Complete a batch in one statement; returns the ids this worker still held."""
        if not jobs:
            return set()
        rows = self.rows(
            queries.JOB_COMPLETE_MANY, ids=[j.id for j in jobs], attempts=[j.attempts for j in jobs]
        )
        return {row[0] for row in rows}

    def complete_many_and_claim(
        self, finished: Sequence[ClaimedJob], queue: str, *, batch: int, lease: timedelta
    ) -> tuple[set[int], list[ClaimedJob]]:
        """Complete the last batch and claim the next in one round trip (a pipeline)."""
        if not finished:
            return set(), self.claim(queue, batch=batch, lease=lease)
        with self.pipeline():
            completed = self.execute(
                queries.JOB_COMPLETE_MANY,
                ids=[j.id for j in finished],
                attempts=[j.attempts for j in finished],
            )
            claimed = self.execute(queries.JOB_CLAIM, queue=queue, batch=batch, lease=lease)
        return {row[0] for row in completed.fetchall()}, [
            ClaimedJob(*r) for r in claimed.fetchall()
        ]

    def fail(
        self,
        job_id: int,
        attempts: int,
        error: str,
        *,
        permanent: bool = False,
        backoff: timedelta | None = None,
        backoff_cap: timedelta | None = None,
    ) -> FailOutcome:
        """Record a failure; a retry waits backoff x 2^attempts (10 s), at most the cap (1 h)."""
        rows = self.rows(
            queries.JOB_FAIL,
            id=job_id,
            attempts=attempts,
            error=error,
            permanent=permanent,
            backoff=backoff,
            backoff_cap=backoff_cap,
        )
        if not rows:
            return FailOutcome(owned=False)
        _, queue, status, run_at = rows[0]
        return FailOutcome(owned=True, queue=queue, status=status, run_at=run_at)

    def extend(self, job_id: int, attempts: int, lease: timedelta) -> bool:
        """True if the lease was pushed forward; False means stop: the job is someone else's."""
        return bool(self.rows(queries.JOB_EXTEND, id=job_id, attempts=attempts, lease=lease))

    def extend_many(self, jobs: Sequence[ClaimedJob], lease: timedelta) -> set[int]:
        """Extend a batch's leases in one statement; returns the ids this worker still holds."""
        rows = self.rows(
            queries.JOB_EXTEND_MANY,
            ids=[j.id for j in jobs],
            attempts=[j.attempts for j in jobs],
            lease=lease,
        )
        return {row[0] for row in rows}

    # -- reaper -----------------------------------------------------------------
    def reap_expired(self) -> list[ReapedJob]:
        return [ReapedJob(*row) for row in self.rows(queries.JOB_REAP_EXPIRED)]

    def purge_finished(self, retention: timedelta, *, batch: int = 10_000) -> int:
        """Delete finished jobs older than retention, one short statement per batch."""
        if batch < 1:
            raise ValueError(f"batch: {batch} must be at least 1")
        total = 0
        while True:
            deleted = self.count(queries.JOB_PURGE_FINISHED, retention=retention, batch=batch)
            total += deleted
            if deleted < batch:
                return total

    def stats_by_queue(self) -> list[dict[str, Any]]:
        """Per queue: counts by status, oldest ready age, next lease expiry, failures today."""
        return self.dicts(queries.JOB_STATS_BY_QUEUE)

    def table_health(self) -> dict[str, Any]:
        """n_dead_tup and last (auto)vacuum of the jobs table (what the article says to watch)."""
        rows = self.dicts(queries.JOB_TABLE_HEALTH)
        return rows[0] if rows else {}

    def retry_failed(
        self, *, ids: list[int] | None, queue: str | None, task: str | None, extra_attempts: int
    ) -> list[tuple[int, str]]:
        """Failed jobs back to queued; returns (id, queue) of each."""
        rows = self.rows(
            queries.JOB_RETRY_FAILED, ids=ids, queue=queue, task=task, extra_attempts=extra_attempts
        )
        return [(row[0], row[1]) for row in rows]

    def cancel_queued(
        self, *, ids: list[int] | None, queue: str | None, task: str | None
    ) -> list[tuple[int, str]]:
        """Queued jobs to failed ('cancelled by operator'); returns (id, queue) of each."""
        rows = self.rows(queries.JOB_CANCEL_QUEUED, ids=ids, queue=queue, task=task)
        return [(row[0], row[1]) for row in rows]

    def get_many(self, ids: list[int]) -> list[dict[str, Any]]:
        return self.dicts(queries.JOB_GET_MANY, ids=ids)

    def ready_by_queue(self) -> dict[str, int]:
        return {queue: count for queue, count in self.rows(queries.JOB_READY_COUNT_BY_QUEUE)}

    # -- schema -----------------------------------------------------------------
    def lock_migrations(self) -> None:
        self.rows(queries.MIGRATION_LOCK)

    def create_migration_table(self) -> None:
        self.execute(queries.MIGRATION_TABLE_CREATE)

    def applied_versions(self) -> list[int]:
        if not self.one(queries.MIGRATION_TABLE_EXISTS)[0]:
            return []
        return [row[0] for row in self.rows(queries.MIGRATION_LIST_APPLIED)]

    def setup_roles(self) -> None:
        self.execute(queries.ROLE_SETUP)

    def apply_migration(self, version: int, name: str, script: LiteralString) -> None:
        self.execute(script)
        self.execute(queries.MIGRATION_RECORD, version=version, name=name)
