"""The producer's statements: insert a job (or many, or a unique one), reserve its kick.

Why apart from pgkick.store.worker: the producer runs inside the app, on its connection and
in its transaction, and its rules (the kick reserved after the commit, a committed job
never followed by an exception) are its own; `JobStore` inherits them, so the producer,
the worker and the CLI keep one store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from pgkick.connections.db import Database, DatabaseError
from pgkick.store import queries, unique
from pgkick.validation import JobSpec

log = logging.getLogger("pgkick.store")


class QueuedJob(NamedTuple):
    """A job just inserted: its id and when it is due (for the kick or the wake-up).

    A tuple, not a dataclass: enqueue_many makes 100,000 of them at a time."""

    id: int
    queue: str
    run_at: datetime


class ProducerStatements(Database):
    """Insert jobs and reserve their queues' kicks (pgkick.kick.watch)."""

    def insert_and_reserve(
        self, spec: JobSpec, *, reserve: bool, pending: timedelta
    ) -> tuple[QueuedJob, bool]:
        """Insert and commit one job, then (if `reserve`) reserve its queue's kick: one round
        trip. Returns the job and whether this caller must kick (pgkick.kick.watch).

        The reservation runs after the COMMIT, in its own transaction: a check made
        before the commit could miss a worker's withdrawal and strand the job."""
        reserved = None
        try:
            with self.pipeline():
                self.execute(queries.TRANSACTION_BEGIN)
                inserted = self._insert(spec)
                commit = self.execute(queries.TRANSACTION_COMMIT)
                if reserve:
                    reserved = self.execute(
                        queries.QUEUE_KICK_RESERVE, queues=[spec.queue], pending=pending
                    )
        except DatabaseError as exc:
            row = committed_row(inserted, commit) if reserve else None
            if row is None:
                raise  # the insert or its commit failed: nothing was committed
            # Committed, but who watches the queue is unknown (a role without the grant on
            # queue_watchers, a dropped connection): never raise now; kick, as if nobody did.
            log.warning("job %s committed; kick check failed (%s), kicking", row[0], exc)
            return QueuedJob._make(row), True
        row = inserted.fetchone()
        assert row is not None
        return QueuedJob._make(row), bool(reserved is not None and reserved.fetchall())

    def reserve_kicks(self, queues: Sequence[str], pending: timedelta) -> set[str]:
        """The queues nobody watches, each now marked with this caller's pending kick."""
        return {
            row[0]
            for row in self.rows(queries.QUEUE_KICK_RESERVE, queues=list(queues), pending=pending)
        }

    def release_kick(self, queue: str) -> None:
        """Forget a pending kick that could not be sent (the next producer kicks instead)."""
        self.execute(queries.QUEUE_KICK_RELEASE, queue=queue)

    def committed_among(self, ids: list[int]) -> list[QueuedJob]:
        """The jobs among `ids` that exist: a savepoint rolled back may have removed some."""
        return [QueuedJob._make(row) for row in self.rows(queries.JOB_COMMITTED_AMONG, ids=ids)]

    def insert(self, spec: JobSpec) -> QueuedJob:
        row = self._insert(spec).fetchone()
        assert row is not None
        return QueuedJob._make(row)

    def _insert(self, spec: JobSpec) -> Any:
        return self.execute(queries.JOB_INSERT, **spec.insert_params())

    def insert_unique(self, spec: JobSpec) -> tuple[QueuedJob, bool]:
        """Insert a job with a unique key unless a live job holds the key (pgkick.store.unique)."""
        row, inserted = unique.insert_one(self, spec)
        return QueuedJob._make(row), inserted

    def insert_many(self, chunks: Iterable[Sequence[JobSpec]]) -> list[QueuedJob]:
        """Insert chunk after chunk in one transaction and one pipeline; jobs in input order.

        Why chunks in a pipeline: the server inserts one chunk while the caller
        validates the next (two cores at work, not one after the other). An
        exception from the chunks' iterator rolls everything back.
        """
        return self.insert_many_unique(chunks)[0]

    def insert_many_unique(
        self, chunks: Iterable[Sequence[JobSpec]]
    ) -> tuple[list[QueuedJob], list[QueuedJob]]:
        """insert_many, where jobs with a unique key a live job (or an earlier job of the
        batch) holds are skipped: returns every job in input order (a skipped one as the
        job holding its key) and the jobs actually inserted (pgkick.store.unique)."""
        every, inserted = unique.insert_many(self, chunks)
        return [QueuedJob._make(row) for row in every], [QueuedJob._make(r) for r in inserted]


def committed_row(inserted: Any, commit: Any) -> tuple[Any, ...] | None:
    """The insert's row if it ran and its COMMIT succeeded before a later statement failed."""
    if commit.statusmessage != "COMMIT":
        return None
    try:
        row = inserted.fetchone()
    except DatabaseError:
        return None
    return tuple(row) if row is not None else None
