"""Bulk actions by filter: retry, cancel or purge every job a filter selects, counted first,
then acted on a batch at a time. `pgkick retry|cancel|purge` with a filter (and `--yes`)
and the Python API (`retry_matching`, `cancel_matching`, `purge_matching`, `count_matching`)
run these same functions.

Why ids first, then batches: the selection is read as pages of ids along the primary key
(one short read-only statement a page, no lock, no transaction held), so a dry run counts
exactly what an action would take without writing anything, and a retry is checked for
unique-key conflicts over the whole selection before its first write (the one-live-job-
per-key rule, pgkick.store.unique). Then each batch of ids is changed by the action's own
statement, in its own short transaction: no lock outlives a batch, so workers claiming and
producers enqueueing meanwhile wait for one batch at most. Each statement re-checks the
job's status as it writes (and, for a retry or a purge, the selection's statuses and
--error: the filtered columns a finished job can change): a job that moved since it was
counted (a queued job claimed, a failed one retried by someone else, run to done or failed
again with another error) is skipped or, for a cancel, takes the running path.

A cancel of running jobs goes through the cancel request (job_cancel_running): the
worker's heartbeat reads the mark and the job fails 'cancelled by operator' when its
task stops, as `pgkick cancel ID` does.

What was selected is what is acted on: jobs enqueued after the count are left alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pgkick.cli import operations
from pgkick.cli.interrupt import BetweenBatches
from pgkick.cli.operations import Retried
from pgkick.connections.db import UniqueViolation
from pgkick.errors import Interrupted, InvalidArgument, UsageError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker
from pgkick.store import unique
from pgkick.store.inspect import JobFilter
from pgkick.store.operator import OperatorStore
from pgkick.validation import MAX_ATTEMPTS_LIMIT

BATCH = 1_000  # ids per statement: each a short transaction (measured: tests/test_bulk.py)
MAX_BATCH = 10_000
# The statuses each action applies to: a filter's --status must be one of them.
ACTIONS: dict[str, tuple[str, ...]] = {
    "retry": ("failed",),
    "cancel": ("waiting", "queued", "running"),
    "purge": ("done", "failed"),
}


@dataclass(frozen=True, slots=True)
class JobSelection(JobFilter):
    """The jobs a bulk action takes: `pgkick jobs`' filters (status, task, queue, unique key,
    group), a created range [since, until) and `error`, text the last error contains
    (in any case for ASCII letters; others as the database's LC_CTYPE folds them). None:
    no filter on that field.

    Why a JobFilter: the listing's fields, checks and parameters are the selection's, defined
    once (pgkick.store.inspect), so a bulk action takes what `pgkick jobs` lists. What is a
    bulk action's own: its status is one the action applies to (ACTIONS), or all of those."""

    def check_status(self) -> None:
        """Not checked here: `statuses` checks it against the action's, when it is known."""

    def statuses(self, action: str) -> list[str]:
        """The statuses `action` takes within this selection; refuses a status it cannot."""
        allowed = ACTIONS[action]
        if self.status is None:
            return list(allowed)
        if self.status not in allowed:
            raise InvalidArgument(
                f"status {self.status!r}: {action} applies to {' or '.join(allowed)} jobs"
            )
        return [self.status]

    def params(self, action: str) -> dict[str, Any]:
        """The statement's parameters; a retry's leave out the jobs that used every attempt,
        which its own statement leaves failed (a dry run counted them, the retry skipped them)."""
        values = self.as_params()
        del values["status"]
        below = MAX_ATTEMPTS_LIMIT if action == "retry" else None
        return {**values, "statuses": self.statuses(action), "attempts_below": below}


def _check_batch(batch: int) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InvalidArgument(f"batch: {batch!r} must be a whole number in 1..{MAX_BATCH}")
    return batch


def _pages(
    store: OperatorStore, selection: JobSelection, action: str, batch: int
) -> Iterator[list[Any]]:
    params, after = selection.params(action), 0
    while True:
        rows = store.ids_matching(params, after=after, limit=batch)
        if rows:
            yield rows
        if len(rows) < batch:
            return
        after = rows[-1][0]


def select(
    store: OperatorStore, selection: JobSelection, action: str, *, batch: int = BATCH
) -> tuple[list[int], dict[str, int]]:
    """The ids `action` would take, in id order, and how many of each status."""
    _check_batch(batch)
    ids: list[int] = []
    by_status: Counter[str] = Counter()
    for rows in _pages(store, selection, action, batch):
        ids += [row[0] for row in rows]
        by_status.update(row[1] for row in rows)
    return ids, dict(sorted(by_status.items()))


def count_matching(store: OperatorStore, selection: JobSelection, action: str) -> dict[str, int]:
    """The dry run: how many jobs `action` would take, by status (nothing written)."""
    if action not in ACTIONS:
        raise InvalidArgument(f"action {action!r}: one of {', '.join(ACTIONS)}")
    return select(store, selection, action)[1]


def _batches(ids: list[int], batch: int) -> Iterator[list[int]]:
    for start in range(0, len(ids), batch):
        yield ids[start : start + batch]


def retry_matching(
    store: OperatorStore,
    selection: JobSelection,
    *,
    extra_attempts: int = 1,
    batch: int = BATCH,
    kicker: Kicker | None = None,
) -> Retried:
    """Put every failed job of the selection back in its queue with `extra_attempts` more,
    a batch at a time, reviving the dependants their failure ended (migration 0019); the
    jobs, (id, queue) each, and how many dependants wait again. Refused, nothing written,
    if a retry would put a job next to a live one with its unique key. Each batch's queues
    are kicked after its commit, by `kicker` or the default one (built before the first
    write: a kicker setting missing refuses the retry, as `pgkick retry` does).

    Why a kick per batch: a later batch can still fail (a producer enqueues a selected
    job's key after the whole selection was checked), and the batches committed before it
    must not wait queued, unkicked, for a sweep. That refusal is the check's one line,
    naming the key and saying how many jobs were retried before it."""
    ids, _ = select(store, selection, "retry", batch=batch)
    if ids:
        operations.check_retry(store, ids=ids, queue=None, task=None)
        kicker = kicker or default_kicker()  # before the first write
    retried: list[tuple[int, str]] = []
    revived = 0
    with BetweenBatches() as ctrl_c:
        for chunk in _batches(ids, batch):
            if ctrl_c.pressed:
                raise _interrupted("retried", len(retried), len(ids))
            try:
                with store.transaction():
                    jobs = store.retry_failed(  # --error re-checked on each row as written
                        ids=chunk,
                        queue=None,
                        task=None,
                        extra_attempts=extra_attempts,
                        error=selection.error,
                    )
                    revived += store.revived_dependants() if jobs else 0
            except UniqueViolation as exc:
                raise _taken_meanwhile(store, chunk, len(retried), exc) from None
            retried += jobs
            if kicker is not None:
                operations.kick_queues(jobs, kicker)
    return Retried(retried, revived)


def _interrupted(done: str, count: int, total: int) -> Interrupted:
    """Ctrl-C during a batch (pgkick.cli.interrupt): that batch finished, the rest are as
    they were; the operator is told how far it got, so a second run is no guess."""
    return Interrupted(
        f"interrupted (Ctrl-C) after it {done} {count} of the {total} jobs selected, "
        "committed; the rest are as they were: run the same command again for them"
    )


def _taken_meanwhile(
    store: OperatorStore, chunk: list[int], done: int, exc: UniqueViolation
) -> UsageError:
    """The refusal of a batch whose job's unique key a live job took after the selection's
    check: check_retry's words for it (else the server's detail), and what came before."""
    conflicts = store.retry_conflicts(ids=chunk, queue=None, task=None)
    why = unique.describe_conflicts(conflicts) if conflicts else exc.diag.message_detail
    return UsageError(
        f"retried {done} job(s) (queued again, their queues kicked), then stopped: {why} "
        "(taken since the retry was checked); the rest of the selection is still failed"
    )


def cancel_matching(
    store: OperatorStore,
    selection: JobSelection,
    *,
    batch: int = BATCH,
    kicker: Kicker | None = None,
) -> tuple[list[int], list[int]]:
    """Cancel every waiting, queued or running job of the selection, a batch at a time:
    waiting and queued ones fail at once (their dependants follow their policy: the queues
    "run anyway" dependants entered are kicked, by `kicker` or the default one), running ones
    get the cancel request (they fail when their task stops). Returns (cancelled, marked)."""
    ids, _ = select(store, selection, "cancel", batch=batch)
    cancelled: list[int] = []
    marked: list[int] = []
    released: set[str] = set()
    with BetweenBatches() as ctrl_c:
        for chunk in _batches(ids, batch):  # queued first: one claimed meanwhile is marked next
            if ctrl_c.pressed:
                break
            done = operations.cancel(store, ids=chunk)
            cancelled += done.cancelled
            marked += done.marked
            released |= done.released
    operations.kick_released(released, lambda: kicker or default_kicker())  # stopped too
    if ctrl_c.pressed and len(cancelled) + len(marked) < len(ids):
        raise _interrupted("cancelled or marked", len(cancelled) + len(marked), len(ids))
    return cancelled, marked


def purge_matching(
    store: OperatorStore, selection: JobSelection, *, batch: int = BATCH
) -> list[int]:
    """Delete every done or failed job of the selection, a batch at a time; their ids.

    A parent one of whose dependants is not done is left (it may still run, or be retried,
    and read that parent's result: job_delete_finished_among); when that dependant was
    selected too and went in a later batch, the jobs left are passed again, until a pass
    deletes none, so a selected failed chain goes whole, its dependants first."""
    ids, _ = select(store, selection, "purge", batch=batch)
    statuses = selection.statuses("purge")
    purged: list[int] = []
    left = ids
    with BetweenBatches() as ctrl_c:
        while left:
            gone: list[int] = []
            for chunk in _batches(left, batch):  # the selection's status and error re-checked
                if ctrl_c.pressed:
                    raise _interrupted("purged", len(purged) + len(gone), len(ids))
                with store.transaction():
                    gone += store.delete_finished_among(
                        chunk, statuses=statuses, error=selection.error
                    )
            if not gone:
                return purged
            purged += gone
            taken = set(gone)
            left = [job_id for job_id in left if job_id not in taken]
    return purged
