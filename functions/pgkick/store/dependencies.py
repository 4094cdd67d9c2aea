"""Jobs that wait for others (issue 34): linking a job just inserted to its parents, and
reading a job's parents' results.

Why two statements around the insert: the parents are checked first (job_parents_missing,
a read), in the enqueue's own transaction, so an unknown parent refuses the enqueue before
its row is written; then, once the children's ids are known, job_await (migration 0017,
a server-side function: a producer may neither read a job's status nor update it) links
them, flags and locks the parents, and sets the children waiting. Cycles cannot be made:
a parent must exist before its child is inserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from pgkick.connections.db import Database
from pgkick.errors import UnknownParent
from pgkick.store import queries
from pgkick.store.statement import Statement, Steps, drive


def check_parents(db: Database, afters: Iterable[Sequence[tuple[int, str]]]) -> None:
    """Raise UnknownParent for the first parent id with no job in this schema (a read:
    nothing written). Runs in the caller's transaction, before the insert."""
    drive(db, checked(afters, db.schema))


def checked(afters: Iterable[Sequence[tuple[int, str]]], schema: str) -> Steps[None]:
    """check_parents as a plan, for the synchronous and the asyncio executors."""
    ids = sorted({parent for after in afters for parent, _ in after})
    if not ids:
        return
    missing = [row[0] for row in (yield Statement(queries.JOB_PARENTS_MISSING, {"ids": ids}))]
    if missing:
        shown = ", ".join(str(m) for m in missing[:5])
        raise UnknownParent(
            f"after: no job {shown} in schema {schema!r}; a job waits only for jobs "
            "enqueued before it, in its own schema (ids of another PGKICK_SCHEMA mean "
            "nothing here)"
        )


def link(
    db: Database, children: Sequence[int], afters: Sequence[Sequence[tuple[int, str]]]
) -> set[int]:
    """Link each child to its parents; returns the children left waiting. In the caller's
    transaction."""
    return drive(db, linked(children, afters))


def linked(children: Sequence[int], afters: Sequence[Sequence[tuple[int, str]]]) -> Steps[set[int]]:
    """link as a plan, for the synchronous and the asyncio executors."""
    child_ids: list[int] = []
    parent_ids: list[int] = []
    policies: list[str] = []
    for child, after in zip(children, afters, strict=True):
        for parent, policy in after:
            child_ids.append(child)
            parent_ids.append(parent)
            policies.append(policy)
    params = {"children": child_ids, "parents": parent_ids, "policies": policies}
    rows = (yield Statement(queries.JOB_AWAIT, params)) if child_ids else []
    return {row[0] for row in rows}


def new_pairs(
    every: Sequence[int],
    inserted: Iterable[int],
    afters: Sequence[tuple[tuple[int, str], ...]],
) -> tuple[list[int], list[tuple[tuple[int, str], ...]]]:
    """enqueue_many's jobs to link (`every`: each input's job id, `inserted`: the ids
    written): (children, their parents), the jobs actually inserted that have parents, each
    with the parents of its own input only: a skipped duplicate is not linked, nor is a key
    repeated in the batch, answered with its first job's id (the first input of an id is
    the one that wrote it)."""
    new = set(inserted)
    pairs = []
    for job, after in zip(every, afters, strict=True):
        if job in new:
            new.discard(job)  # the id's later inputs are the repeats
            if after:
                pairs.append((job, after))
    return [child for child, _ in pairs], [after for _, after in pairs]


def parent_results(db: Database, job_id: int) -> dict[int, Any]:
    """The results of `job_id`'s parents that ended done, by id (JobContext.parent_results)."""
    return {row[0]: row[1] for row in db.rows(queries.JOB_PARENT_RESULTS, id=job_id)}


def released_queue_names(text: str | None) -> tuple[str, ...]:
    """The queues in pgkick.released_queues' text (migration 0017's trigger appends them,
    newline-separated: queue names are printable, never a newline); none for NULL or ''."""
    return tuple(text.split("\n")) if text else ()


class ReleasedDependants(Database):
    """The worker's side (mixed into WorkerStore): the queues that its completes and fails
    made ready for jobs waiting on its jobs, to kick (pgkick.worker.dependants)."""

    # Queues where a complete of this store released jobs waiting on the completed ones
    # (migration 0017), not yet kicked: the worker takes them (take_released) after each
    # complete. Filled from the complete statements' own rows: no statement of its own.
    _released: tuple[str, ...] = ()

    def exclusive(self) -> Any:
        """Hold this connection for several statements (the transaction that completes a
        job with the children it spawned, pgkick.worker.spawn): the lease keeper's thread
        waits instead of slipping into it."""
        return self._io

    def take_released(self) -> set[str]:
        """The queues dependants entered since the last call (and forget them)."""
        taken, self._released = set(self._released), ()
        return taken

    def _note_released(self, rows: Sequence[tuple[Any, ...]]) -> None:
        for row in rows:
            self._released += released_queue_names(row[-1])

    def dependants_ready_queues(self, job_id: int) -> set[str]:
        """The queues of `job_id`'s dependants (transitively) that are queued now."""
        return {row[0] for row in self.rows(queries.JOB_DEPENDANTS_READY_QUEUES, id=job_id)}

    def reserve_kicks(self, queues: Sequence[str], pending: timedelta) -> list[str]:
        """Of `queues`, those nobody watches, each marked with a pending kick (the producer's
        queue_kick_reserve): the caller kicks exactly those."""
        rows = self.rows(queries.QUEUE_KICK_RESERVE, queues=list(queues), pending=pending)
        return [row[0] for row in rows if row[0] is not None]
