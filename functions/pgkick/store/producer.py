"""The producer's statements: insert a job (or many, or a unique one), reserve its kick,
re-read what committed, read a job's outcome. Each is bound here and nowhere else.

Why a store of its own: the producer runs inside the app, on its connection and in its
transaction, as the least-privileged role (pgkick_producer: insert, and read back what
the insert returned); it has no business holding the worker's or the operators'
statements. Its rules (the kick reserved after the commit, a committed job never
followed by an exception) are `insert_and_reserve`'s and `CommitRoundTrip`'s. Each
statement is bound once, as a `Statement` (pgkick.store.statement), so the asyncio
producer (pgkick.aio) sends exactly what `ProducerStore` sends.
"""

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import repeat
from typing import Any, NamedTuple

from pgkick.connections.db import Database, DatabaseError, answered_outside_transaction
from pgkick.errors import MisuseError, NothingCommitted
from pgkick.store import bulk, queries, unique
from pgkick.store.statement import BEGIN, COMMIT, Answer, Statement, drive
from pgkick.validation import JobSpec

log = logging.getLogger("pgkick.store")


class QueuedJob(NamedTuple):
    """A job just inserted: its id and when it is due (for the kick or the wake-up).

    A tuple, not a dataclass: enqueue_many makes 100,000 of them at a time."""

    id: int
    queue: str
    run_at: datetime


def _queued_jobs(rows: list[Any]) -> list[QueuedJob]:
    """QueuedJobs straight from rows of (id, queue, run_at), all in C: QueuedJob._make is a
    Python call and a length check per row, as long again for 100,000 rows."""
    return list(map(tuple.__new__, repeat(QueuedJob), rows))


class Outcome(NamedTuple):
    """One job's status, stored result (decoded JSON) and last error."""

    status: str
    result: Any
    last_error: str | None


# -- the statements, bound -----------------------------------------------------------
def insert(spec: JobSpec) -> Statement:
    return Statement(queries.JOB_INSERT, spec.insert_params())


def reserve_kicks(queues: Sequence[str], pending: timedelta) -> Statement:
    """Marks the queues nobody watches with this caller's pending kick (pgkick.kick.watch)."""
    return Statement(queries.QUEUE_KICK_RESERVE, {"queues": list(queues), "pending": pending})


def outcome_of(job_id: int) -> Statement:
    """The job's status, result and last error (the app's read: `wait`, `wait_async`)."""
    return Statement(queries.JOB_OUTCOME, {"id": job_id})


def committed_among(ids: list[int]) -> Statement:
    return Statement(queries.JOB_COMMITTED_AMONG, {"ids": ids})


@dataclass(frozen=True, slots=True)
class CommitRoundTrip:
    """A group's jobs (pgkick.producer.group_commit): BEGIN; INSERT; COMMIT; then reserve the
    kicks of the `reserve` queues: one round trip, one commit (one wait for the disk) for
    every job. (A lone job takes two plain statements: `insert_and_reserve`; a group with
    no kick to reserve and one trace context, one: `insert_together`.)

    The INSERT is one job_insert_many for the whole group when its jobs share one trace
    context (always, without OpenTelemetry): psycopg's pipeline costs about 70 us of client
    CPU a statement, which a group of 8 paid 8 times; jobs enqueued under different spans
    keep one INSERT each, so each keeps its own trace context.

    The reservation runs after the COMMIT, in its own transaction: a check made before
    the commit could miss a worker's withdrawal and strand the job. Once the COMMIT
    succeeded nothing raises: a failed reservation means kick every queue, as if nobody
    watched (a role without the grant, a dropped connection)."""

    specs: Sequence[JobSpec]
    reserve: Sequence[str]
    pending: timedelta

    @property
    def one_insert(self) -> bool:
        return len({(spec.traceparent, spec.tracestate) for spec in self.specs}) == 1

    def statements(self) -> list[Statement]:
        if self.one_insert:
            inserts = [bulk.insert_many(list(enumerate(self.specs)))]
        else:
            inserts = list(map(insert, self.specs))
        sent = [BEGIN, *inserts, COMMIT]
        return [*sent, reserve_kicks(self.reserve, self.pending)] if self.reserve else sent

    def outcome(
        self, answers: list[Answer], error: DatabaseError | None
    ) -> tuple[list[QueuedJob], set[str]]:
        """The jobs, and the queues whose kick this caller must send; or the error, when
        nothing is known to have committed."""
        count = 1 if self.one_insert else len(self.specs)
        inserted = answers[1 : 1 + count]
        jobs = [QueuedJob._make(row) for a in inserted for row in a.rows or ()]
        if error is not None:
            committed = len(answers) > count + 1 and answers[count + 1].status == "COMMIT"
            if not committed or len(jobs) != len(self.specs):
                raise error  # the insert or its commit failed: nothing was committed
            log.warning("jobs committed; kick check failed (%s), kicking", error)
            return jobs, set(self.reserve)
        reserved = answers[-1].rows if self.reserve else None
        return jobs, {row[0] for row in reserved or ()}


class ProducerStore(Database):
    """The producer's statements on one connection (autocommit, or the app's transaction)."""

    def insert_and_reserve(
        self, spec: JobSpec, *, reserve: bool, pending: timedelta
    ) -> tuple[QueuedJob, bool]:
        """Insert and commit one job, then (if `reserve`) reserve its queue's kick. Returns
        the job and whether this caller must kick.

        Two plain statements, not a group's pipeline (`CommitRoundTrip`): on the autocommit
        connection the INSERT is its own transaction (one commit, one wait for the disk),
        and the reservation follows it in one of its own, after the commit as the rule
        wants. psycopg's pipeline mode cost a lone job about 70 us of client CPU a
        statement and the server a wake-up for each of BEGIN, INSERT and COMMIT; with
        nothing to reserve (no kicker, a delayed job) a lone job is now one statement, as
        pgbench sends it. Once the INSERT returned nothing raises: a failed reservation
        means kick, as if nobody watched."""
        if not self.conn.autocommit:
            raise MisuseError(
                "insert_and_reserve commits by itself: it needs an autocommit connection "
                "(use pgkick.transaction or enqueue_in inside the app's transaction)"
            )
        job = self.insert(spec)
        if not reserve:
            return job, False
        try:
            return job, bool(self.reserve_kicks([spec.queue], pending))
        except DatabaseError as exc:  # committed: who watches is unknown, so kick
            log.warning("job committed; kick check failed (%s), kicking", exc)
            return job, True

    def insert_together(self, specs: Sequence[JobSpec]) -> list[QueuedJob]:
        """Insert jobs that share one trace context in one statement: on the autocommit
        connection its own transaction and its own commit, as a lone job's INSERT (a group
        with no kick to reserve: pgkick.producer.group_commit). No pipeline, no BEGIN and
        COMMIT around it: those cost a group about 200 us of client CPU for nothing.

        Raises NothingCommitted when the server refused the statement (the connection
        answered and is outside any transaction: the statement's own rolled back), so
        each job may be inserted again alone; any other error leaves the outcome unknown."""
        if not self.conn.autocommit:
            raise MisuseError(
                "insert_together commits by itself: it needs an autocommit connection"
            )
        try:
            return _queued_jobs(self._rows(bulk.insert_many(list(enumerate(specs)))))
        except DatabaseError as exc:
            if answered_outside_transaction(self.conn):
                raise NothingCommitted(f"the group's insert was refused: {exc}") from exc
            raise

    def reserve_kicks(self, queues: Sequence[str], pending: timedelta) -> set[str]:
        """The queues nobody watches, each now marked with this caller's pending kick."""
        return {row[0] for row in self._rows(reserve_kicks(queues, pending))}

    def release_kick(self, queue: str) -> None:
        """Forget a pending kick that could not be sent (the next producer kicks instead)."""
        self.execute(queries.QUEUE_KICK_RELEASE, queue=queue)

    def join_transaction(self) -> None:
        """Open the app's transaction on its idle connection (not autocommit): psycopg's own
        transaction() would otherwise make a BEGIN ... COMMIT of its own (transaction_join)."""
        self.execute(queries.TRANSACTION_JOIN)

    def committed_among(self, ids: list[int]) -> list[QueuedJob]:
        """The jobs among `ids` that exist: a savepoint rolled back may have removed some."""
        return [QueuedJob._make(row) for row in self._rows(committed_among(ids))]

    def insert(self, spec: JobSpec) -> QueuedJob:
        return QueuedJob._make(self._rows(insert(spec))[0])

    def insert_unique(self, spec: JobSpec) -> tuple[QueuedJob, bool]:
        """Insert a job with a unique key unless a live job holds the key (pgkick.store.unique)."""
        row, inserted = drive(self, unique.insert_one(spec))
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
        batch = unique.UniqueBatch()
        now = self.clock()  # once: the chunks and the base of their due times share it
        sent: list[tuple[list[tuple[int, JobSpec]], Statement, Any]] = []
        base: Any = None  # transaction_now's cursor, if a chunk is answered by ids
        with self.transaction():
            with self.pipeline():
                for plain in _sized(map(batch.split, chunks)):
                    if len(plain) >= bulk.IDS_ONLY_FROM:
                        if base is None:  # once, with the first chunk answered by ids
                            base = self._send(bulk.transaction_now(now))
                        insert = bulk.insert_many_ids(plain, now)
                    elif plain:
                        insert = bulk.insert_many(plain)
                    else:
                        continue
                    sent.append((plain, insert, self._send(insert)))
            at: Any = None if base is None else base.fetchone()[0]
            for plain, insert, cursor in sent:
                rows = cursor.fetchall()
                by_ids = insert.query is queries.JOB_INSERT_MANY_IDS
                batch.took_plain(plain, bulk.rows_of(insert, rows, at) if by_ids else rows)
            every, inserted = drive(self, batch.insert_keyed())
        jobs = _queued_jobs(every)  # a batch without keys inserted every job: one list
        return jobs, jobs if inserted is every else _queued_jobs(inserted)

    def outcome(self, job_id: int) -> Outcome | None:
        """The job's status, result and last error; None if no such job (the app's read)."""
        rows = self._rows(outcome_of(job_id))
        return Outcome(*rows[0]) if rows else None

    def _send(self, statement: Statement) -> Any:
        return self.execute(statement.query, **statement.params)

    def _rows(self, statement: Statement) -> list[tuple[Any, ...]]:
        return self.rows(statement.query, **statement.params)


def _sized(chunks: Iterable[list[tuple[int, JobSpec]]]) -> Iterator[list[tuple[int, JobSpec]]]:
    """Each chunk's plain jobs in runs one statement can carry (bulk.sized)."""
    for plain in chunks:
        yield from bulk.sized(plain)
