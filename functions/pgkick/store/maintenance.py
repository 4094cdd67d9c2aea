"""The statements of the reaper, the operators' commands and the migrations.

Why apart from pgkick.store.worker: the hot paths (insert, claim, complete, fail,
extend) are what a reader of the queue looks for; these run once an hour, a
day, or by hand. `JobStore` inherits them, so every caller keeps one store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, LiteralString

from pgkick.connections.db import Database
from pgkick.errors import InvalidArgument
from pgkick.store import queries


@dataclass(frozen=True, slots=True)
class ReapedJob:
    id: int
    queue: str
    status: str
    attempts: int


STRANDED_AFTER = timedelta(minutes=1)


class MaintenanceStatements(Database):
    """Reap, purge, report, retry, cancel, migrate."""

    # -- reaper -----------------------------------------------------------------
    def reap_expired(self, queue: str | None = None) -> list[ReapedJob]:
        """Expired leases back to queued (or failed at max_attempts): all, or one queue's."""
        return [ReapedJob(*row) for row in self.rows(queries.JOB_REAP_EXPIRED, queue=queue)]

    def latest_lease(self, queue: str) -> datetime | None:
        """When the last lease held in `queue` expires (None: nothing running)."""
        value = self.one(queries.JOB_LEASE_LATEST_IN_QUEUE, queue=queue)[0]
        return value if isinstance(value, datetime) else None

    def purge_finished(self, retention: timedelta, *, batch: int = 10_000) -> int:
        """Delete finished jobs older than retention, one short statement per batch."""
        if batch < 1:
            raise InvalidArgument(f"batch: {batch} must be at least 1")
        total = 0
        while True:
            deleted = self.count(queries.JOB_PURGE_FINISHED, retention=retention, batch=batch)
            total += deleted
            if deleted < batch:
                return total

    def stats_by_queue(self, stranded_after: timedelta = STRANDED_AFTER) -> list[dict[str, Any]]:
        """Per queue: counts by status, oldest ready age, next lease expiry, failures today,
        and `stranded`: ready for longer than `stranded_after` with no worker watching (a
        lost kick, or a wake-up that could not be booked)."""
        return self.dicts(queries.JOB_STATS_BY_QUEUE, stranded_after=stranded_after)

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

    def retry_conflicts(
        self, *, ids: list[int] | None, queue: str | None, task: str | None
    ) -> list[tuple[int, str, int, str]]:
        """(job, its unique key, the job in the way, that job's status) for each failed job
        of the selection a retry would put next to another live job with its key."""
        rows = self.rows(queries.JOB_RETRY_UNIQUE_CONFLICTS, ids=ids, queue=queue, task=task)
        return [(row[0], row[1], row[2], row[3]) for row in rows]

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

    def roles_set_up(self) -> bool:
        """pgkick's three roles exist (an earlier `migrate --roles` made them)."""
        return bool(self.one(queries.ROLE_SETUP_DONE)[0])

    def apply_migration(self, version: int, name: str, script: LiteralString) -> None:
        self.execute(script)
        self.execute(queries.MIGRATION_RECORD, version=version, name=name)

    def create_schema(self) -> None:
        self.execute(queries.SCHEMA_CREATE)

    def legacy_schema(self) -> str | None:
        """Where an install from before 0006 keeps its tables (None: not such an install)."""
        row = self.execute(queries.MIGRATION_TABLE_LEGACY).fetchone()
        return str(row[0]) if row else None

    def set_migration_path(self, path: str) -> None:
        """search_path until the end of this transaction (`path` as SET would take it)."""
        self.execute(queries.MIGRATION_SEARCH_PATH_SET, path=path)
