"""The statements of the reaper and the operators' commands (`pgkick status`, retry,
cancel, purge): what runs once an hour, a day, or by hand.

Why a store of its own: these run as pgkick_maintainer (purge, cancel, more attempts),
never on the hot paths, and neither the producer nor the worker should hold them.
The CLI, which also enqueues and kicks, composes this store with the producer's
(pgkick.cli.main); the migrations have their own (pgkick.store.migrations).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pgkick.errors import InvalidArgument
from pgkick.store import queries
from pgkick.store.dependencies import released_queue_names
from pgkick.store.expired import ExpiredLeases, ReapedJob
from pgkick.store.healing import QueueHealing

__all__ = ["STRANDED_AFTER", "MaintenanceStore", "ReapedJob"]

STRANDED_AFTER = timedelta(minutes=1)


class MaintenanceStore(ExpiredLeases, QueueHealing):
    """Reap (from ExpiredLeases), heal (from QueueHealing), purge, report, retry, cancel,
    look jobs up."""

    def purge_finished(self, retention: timedelta, *, batch: int = 10_000) -> int:
        """Delete finished jobs older than retention, one short statement per batch."""
        return self.purge_while(retention, batch=batch, more=lambda: True)[0]

    def purge_while(
        self, retention: timedelta, *, batch: int, more: Callable[[], bool]
    ) -> tuple[int, bool]:
        """Delete finished jobs older than retention, a batch at a time while `more()` (the
        reaper: while its invocation has time left). Returns (deleted, all of them gone):
        what is left waits for the next run, which starts where this one stopped.

        A short batch ends the purge unless it deleted a dependant: that dependant's parent,
        left while it was not done, may go now, so the next statement runs. Stopping there
        made the outcome hang on the batch (an old failed chain went whole in batches of
        one, a level a purge in batches of 10,000) and differ from the dry run's count."""
        if batch < 1:
            raise InvalidArgument(f"batch: {batch} must be at least 1")
        total = 0
        while more():
            deleted, dependant = self.one(
                queries.JOB_PURGE_FINISHED, retention=retention, batch=batch
            )
            total += deleted
            if deleted < batch and not dependant:
                return total, True
        return total, False

    def purgeable_count(self, retention: timedelta) -> dict[str, int]:
        """How many done and failed jobs finished more than `retention` ago, by status:
        what `purge_finished` would delete (its dry run), an old failed chain whole."""
        return dict(self.rows(queries.JOB_PURGEABLE_COUNT, retention=retention))

    def reap_refused(self) -> str | None:
        """Why this session's role may not reap (the purges' deletes it lacks, naming the
        role that may), or None: checked before a run writes or kicks anything."""
        rows = self.rows(queries.SESSION_REAP_PRIVILEGES_MISSING)
        if not rows:
            return None
        tables = " or ".join(table for _, table in rows)
        return (
            f"role {rows[0][0]} lacks DELETE on {tables}, which the reaper's purge needs: "
            "nothing done; run it as a role granted pgkick_maintainer (pgkick migrate --roles)"
        )

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
        self,
        *,
        ids: list[int] | None,
        queue: str | None,
        task: str | None,
        extra_attempts: int,
        error: str | None = None,
    ) -> list[tuple[int, str]]:
        """Failed jobs back to queued; returns (id, queue) of each. The dependants their
        failure had ended wait for them again (migration 0019's trigger, in this statement):
        `revived_dependants` counts them, in the same transaction. `error`: only those whose
        last error still contains it (a bulk retry's --error, re-checked as it writes)."""
        rows = self.rows(
            queries.JOB_RETRY_FAILED,
            ids=ids,
            queue=queue,
            task=task,
            extra_attempts=extra_attempts,
            error=error,
        )
        return [(row[0], row[1]) for row in rows]

    def revived_dependants(self) -> int:
        """How many dependants the retries of the current transaction revived (0 outside
        one: the count lives as long as the transaction)."""
        return int(self.one(queries.JOB_REVIVED_DEPENDANTS_COUNT)[0])

    def revivable_count(self, ids: list[int]) -> int:
        """How many failed jobs outside `ids` a retry of them would revive, at most (the
        dependants their failures ended, transitively): the bulk retry's dry run."""
        return int(self.one(queries.JOB_REVIVABLE_COUNT, ids=ids)[0])

    def retry_blocked(
        self, *, ids: list[int] | None, queue: str | None, task: str | None
    ) -> list[tuple[int, int]]:
        """(job, its failed parent) for each failed job of the selection that waits, under
        policy fail or cancel, for a failed parent the selection leaves out: a retry leaves
        it failed (job_retry_failed); the parent's retry revives it."""
        rows = self.rows(queries.JOB_RETRY_BLOCKED_BY_PARENTS, ids=ids, queue=queue, task=task)
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
        """Queued or waiting jobs to failed ('cancelled by operator'); returns (id, queue) of
        each. A waiting job's dependants then follow their policy (the dependency trigger)."""
        rows = self.rows(queries.JOB_CANCEL_QUEUED, ids=ids, queue=queue, task=task)
        return [(row[0], row[1]) for row in rows]

    def ids_matching(self, filters: dict[str, Any], *, after: int, limit: int) -> list[Any]:
        """(id, status) of up to `limit` jobs a bulk action selects, above id `after`."""
        return self.rows(queries.JOB_ID_PAGE_MATCHING, after=after, limit=limit, **filters)

    def delete_finished_among(
        self, ids: list[int], *, statuses: list[str], error: str | None
    ) -> list[int]:
        """Delete the jobs among `ids` still in one of `statuses` (done, failed) and, with
        `error`, whose last error still contains it: a bulk purge's selection, re-checked
        as each row is deleted (a job retried and run since it was counted is not one of
        them any more). Returns their ids."""
        rows = self.rows(queries.JOB_DELETE_FINISHED_AMONG, ids=ids, statuses=statuses, error=error)
        return [row[0] for row in rows]

    def get_many(self, ids: list[int]) -> list[dict[str, Any]]:
        return self.dicts(queries.JOB_GET_MANY, ids=ids)

    def ready_by_queue(self) -> dict[str, int]:
        return {queue: count for queue, count in self.rows(queries.JOB_READY_COUNT_BY_QUEUE)}

    def released_queues(self) -> set[str]:
        """The queues dependants entered in this transaction (read it before the commit: the
        setting is the transaction's): a cancel's waiting jobs under "run anyway" are queued
        by the dependency trigger, and nobody else kicks them."""
        (text,) = self.one(queries.JOB_RELEASED_QUEUES)
        return set(released_queue_names(text))

    def cancel_running(
        self, *, ids: list[int] | None, queue: str | None, task: str | None
    ) -> list[tuple[int, str]]:
        """Mark running jobs for cancellation; returns (id, queue) of each marked."""
        rows = self.rows(queries.JOB_CANCEL_RUNNING, ids=ids, queue=queue, task=task)
        return [(row[0], row[1]) for row in rows]

    def purge_ticks(self, retention: timedelta, kept_at_least: timedelta) -> int:
        """Forget periodic ticks older than the retention and than `kept_at_least` (how long
        a tick can be delivered again: forgotten sooner, it would make a second job);
        returns how many."""
        return self.count(
            queries.PERIODIC_TICK_PURGE, retention=retention, kept_at_least=kept_at_least
        )

    def purge_stale_starts(self) -> int:
        """Forget rate-limit starts no window counts any more (of keys no claim prunes: a
        tenant gone quiet); returns how many."""
        return self.count(queries.JOB_START_PURGE_STALE)
