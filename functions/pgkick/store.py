"""The only module that talks to PostgreSQL: every statement pgkick runs goes through here.

Why one module: the worker loop, the producer and the reaper are plain Python
over a `JobStore`, so the rules (fencing, batching, the clock) live in one place
and the SQL itself lives in `sql/` (bundled as `pgkick.queries`).

Connections are made for transaction-mode poolers (PgBouncer, Neon's pooler,
RDS Proxy): no prepared statements, no session state, and autocommit, so each
statement is its own short transaction: a claim is committed at once and no
transaction is open while a job's code runs (the article's vacuum trap).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg

from pgkick import queries

# Returns the instant the SQL should treat as now, or None for the server's now().
Clock = Callable[[], datetime | None]
Connection = psycopg.Connection[tuple[Any, ...]]


def server_clock() -> datetime | None:
    """The default clock: let PostgreSQL's now() decide."""
    return None


class DatabaseUnavailable(RuntimeError):
    """Could not connect (wrong DSN, server down, resuming compute, too many connections)."""


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job this worker holds under a lease; `attempts` is the fencing token."""

    id: int
    queue: str
    task: str
    payload: Any
    attempts: int
    max_attempts: int


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A job just inserted: its id and when it is due (for the kick or the wake-up)."""

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


def connect(
    dsn: str,
    *,
    autocommit: bool = True,
    connect_timeout: int = 5,
    retries: int = 0,
    retry_delay: float = 0.5,
    application_name: str = "pgkick",
) -> Connection:
    """Open one short-lived, pooler-safe connection; retry for a compute that is resuming."""
    for attempt in range(retries + 1):
        try:
            conn = psycopg.connect(
                dsn,
                autocommit=autocommit,
                prepare_threshold=None,
                connect_timeout=connect_timeout,
                application_name=application_name,
            )
            return conn
        except psycopg.OperationalError as exc:
            if attempt == retries:
                raise DatabaseUnavailable(
                    f"cannot connect to PostgreSQL: {_one_line(exc)}"
                ) from exc
            time.sleep(retry_delay * 2**attempt)
    raise AssertionError("unreachable")


class JobStore:
    """The queue's statements over one connection (autocommit, or the caller's transaction)."""

    def __init__(self, conn: Connection, clock: Clock = server_clock) -> None:
        self.conn = conn
        self.clock = clock

    @classmethod
    @contextmanager
    def open(cls, dsn: str, clock: Clock = server_clock, **options: Any) -> Iterator[JobStore]:
        """A store on its own connection, closed on exit (an idle session can keep a DB awake)."""
        conn = connect(dsn, **options)
        try:
            yield cls(conn, clock)
        finally:
            conn.close()

    # -- producer ---------------------------------------------------------------
    def insert(
        self,
        *,
        queue: str,
        task: str,
        payload_json: str,
        run_at: datetime | None,
        delay: timedelta,
        max_attempts: int,
    ) -> QueuedJob:
        row = self._one(
            queries.JOB_INSERT,
            queue=queue,
            task=task,
            payload=payload_json,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
        )
        return QueuedJob(row[0], row[1], row[2])

    def insert_many(
        self,
        *,
        queues: Sequence[str],
        tasks: Sequence[str],
        payloads_json: Sequence[str],
        run_ats: Sequence[datetime | None],
        delays: Sequence[timedelta],
        max_attempts: Sequence[int],
    ) -> list[QueuedJob]:
        rows = self._all(
            queries.JOB_INSERT_MANY,
            queues=list(queues),
            tasks=list(tasks),
            payloads=list(payloads_json),
            run_ats=list(run_ats),
            delays=list(delays),
            max_attempts=list(max_attempts),
        )
        return [QueuedJob(r[0], r[1], r[2]) for r in rows]

    # -- worker -----------------------------------------------------------------
    def claim(self, queue: str, *, batch: int, lease: timedelta) -> list[ClaimedJob]:
        rows = self._all(queries.JOB_CLAIM, queue=queue, batch=batch, lease=lease)
        return [ClaimedJob(*row) for row in rows]

    def complete(self, job_id: int, attempts: int) -> bool:
        """True if this attempt still held the job and it is now done."""
        return self._count(queries.JOB_COMPLETE, id=job_id, attempts=attempts) == 1

    def complete_many(self, jobs: Sequence[ClaimedJob]) -> set[int]:
        """Complete a batch in one statement; returns the ids this worker still held."""
        if not jobs:
            return set()
        rows = self._all(
            queries.JOB_COMPLETE_MANY, ids=[j.id for j in jobs], attempts=[j.attempts for j in jobs]
        )
        return {row[0] for row in rows}

    def fail(
        self, job_id: int, attempts: int, error: str, *, permanent: bool = False
    ) -> FailOutcome:
        rows = self._all(
            queries.JOB_FAIL, id=job_id, attempts=attempts, error=error, permanent=permanent
        )
        if not rows:
            return FailOutcome(owned=False)
        _, queue, status, run_at = rows[0]
        return FailOutcome(owned=True, queue=queue, status=status, run_at=run_at)

    def extend(self, job_id: int, attempts: int, lease: timedelta) -> bool:
        """True if the lease was pushed forward; False means stop: the job is someone else's."""
        return bool(self._all(queries.JOB_EXTEND, id=job_id, attempts=attempts, lease=lease))

    def extend_many(self, jobs: Sequence[ClaimedJob], lease: timedelta) -> set[int]:
        """Extend a batch's leases in one statement; returns the ids this worker still holds."""
        rows = self._all(
            queries.JOB_EXTEND_MANY,
            ids=[j.id for j in jobs],
            attempts=[j.attempts for j in jobs],
            lease=lease,
        )
        return {row[0] for row in rows}

    # -- reaper -----------------------------------------------------------------
    def reap_expired(self) -> list[ReapedJob]:
        return [ReapedJob(*row) for row in self._all(queries.JOB_REAP_EXPIRED)]

    def purge_finished(self, retention: timedelta, *, batch: int = 10_000) -> int:
        """Delete finished jobs older than retention, one short statement per batch."""
        total = 0
        while True:
            deleted = self._count(queries.JOB_PURGE_FINISHED, retention=retention, batch=batch)
            total += deleted
            if deleted < batch:
                return total

    def stats_by_queue(self) -> list[dict[str, Any]]:
        """Per queue: counts by status, oldest ready age, next lease expiry, failures today."""
        cur = self._execute(queries.JOB_STATS_BY_QUEUE)
        names = [column.name for column in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def table_health(self) -> dict[str, Any]:
        """n_dead_tup and last (auto)vacuum of the jobs table (what the article says to watch)."""
        cur = self._execute(queries.JOB_TABLE_HEALTH)
        names = [column.name for column in cur.description or []]
        row = cur.fetchone()
        return dict(zip(names, row, strict=True)) if row else {}

    def ready_by_queue(self) -> dict[str, int]:
        return {queue: count for queue, count in self._all(queries.JOB_READY_COUNT_BY_QUEUE)}

    # -- schema -----------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def lock_migrations(self) -> None:
        self._all(queries.MIGRATION_LOCK)

    def create_migration_table(self) -> None:
        self._execute(queries.MIGRATION_TABLE_CREATE)

    def applied_versions(self) -> list[int]:
        if not self._one(queries.MIGRATION_TABLE_EXISTS)[0]:
            return []
        return [row[0] for row in self._all(queries.MIGRATION_LIST_APPLIED)]

    def apply_migration(self, version: int, name: str, script: LiteralString) -> None:
        self._execute(script)
        self._execute(queries.MIGRATION_RECORD, version=version, name=name)

    # -- plumbing ---------------------------------------------------------------
    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"now": self.clock(), **params}

    def _execute(self, query: LiteralString, **params: Any) -> psycopg.Cursor[tuple[Any, ...]]:
        return self.conn.execute(query, self._params(params) if "%(" in query else None)

    def _all(self, query: LiteralString, **params: Any) -> list[tuple[Any, ...]]:
        return self._execute(query, **params).fetchall()

    def _one(self, query: LiteralString, **params: Any) -> tuple[Any, ...]:
        row = self._execute(query, **params).fetchone()
        if row is None:
            raise RuntimeError(f"expected a row from: {query.splitlines()[0]}")
        return row

    def _count(self, query: LiteralString, **params: Any) -> int:
        return self._execute(query, **params).rowcount


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
