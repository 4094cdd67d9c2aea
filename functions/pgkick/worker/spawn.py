"""Fan-out from inside a task (issue 34): the children a running job spawns are written in
the transaction that completes it, or never.

How: `JobContext.spawn`/`spawn_many` check each child as an app's enqueue_many does (bad
input raises at the call, naming jobs[i]; parents outside this fan-out must exist), then
reserve the children's ids from the jobs' sequence in one statement
(pgkick.store.spawned) and keep (ids, checked jobs) in this run's buffer: nothing is
written. The ids are returned, so a join spawned after its siblings names them in
`after=`. When the task returns, the worker completes that job alone, in one transaction
of its own (`Spawns.complete`): the complete, fenced by the attempt, then the children's
inserts with their reserved ids and their links (job_await). A job this attempt no longer
holds (a lease lost, a cancel) completes nothing, and nothing else is written either.
Jobs that spawned nothing keep the batched complete, unchanged: one dict look-up each.

Any other end of the run (a failure, a retry, a snooze or `job.sleep`, a continuation, a
lost lease, a crash or SIGKILL) drops the buffer: no child row ever exists, and the next
run spawns afresh (fresh ids). A continuation or sleep so drops what the run spawned
before it: the replay runs the task's code again from the top, its spawn calls included
(they are not steps), and those children are inserted when the job finally completes.
So a spawn inside `job.step` is refused (its stored result, the ids, would come back on a
replay whose children were never written), and spawned ids should not be passed to a
step as arguments (a replay gets other ids: a changed step). A batch task's call has no
JobContext: it cannot spawn.

Refused at the call: `unique_key`, `debounce` and `throttle`. Their insert may answer
with a job that exists already (or replace its payload), which a reserved id cannot
name, and a debounce's advisory lock would be taken in the worker's completion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pgkick.errors import InvalidArgument
from pgkick.kick.kickers import due_by
from pgkick.store import dependencies
from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES, JobSpec

# The producer's checks and statements are imported at a task's first spawn, not here:
# every worker imports this module, few tasks spawn, and a kick's cold start (issue 32's
# cold path) should not pay for the producer.
if TYPE_CHECKING:
    from pgkick.store.producer import QueuedJob

log = logging.getLogger("pgkick.spawn")

# One spawn call's children: their reserved ids and checked jobs (one trace context).
Buffered = tuple[list[int], list[JobSpec]]


class Spawns:
    """The children each running job of a worker spawned, buffered until it completes."""

    def __init__(self, store: WorkerStore) -> None:
        self.store = store
        self._buffers: dict[tuple[int, int], list[Buffered]] = {}  # (job id, attempt)

    def spawner(self, job: ClaimedJob) -> Callable[[Iterable[Mapping[str, Any]]], list[int]]:
        """JobContext.spawn_many for `job`: check, reserve ids, buffer; returns the ids."""

        def spawn_many(jobs: Iterable[Mapping[str, Any]]) -> list[int]:
            from pgkick.producer.plan import job_specs
            from pgkick.store import spawned

            specs = job_specs(list(enumerate(jobs)), DEFAULT_MAX_PAYLOAD_BYTES)
            _refuse_keys(specs)
            buffers = self._buffers.get((job.id, job.attempts), [])
            ours = {job.id}.union(*(set(ids) for ids, _ in buffers))
            outside = [[p for p in spec.after if p[0] not in ours] for spec in specs]
            dependencies.check_parents(self.store, outside)  # a read: UnknownParent
            ids = spawned.reserve_ids(self.store, len(specs))
            if ids:
                self._buffers.setdefault((job.id, job.attempts), []).append((ids, specs))
            return ids

        return spawn_many

    def take(self, job: ClaimedJob) -> list[Buffered] | None:
        """The buffer of `job`'s run (and forget it), None when it spawned nothing."""
        if not self._buffers:
            return None
        return self._buffers.pop((job.id, job.attempts), None)

    def drop_all(self) -> None:
        """A drain ending: whatever was not completed is never written."""
        self._buffers.clear()

    def complete(self, job: ClaimedJob, buffered: list[Buffered]) -> list[QueuedJob] | None:
        """Complete `job` (its result with it) and write its children, in one transaction;
        None when this attempt no longer holds the job (nothing written). Returns the
        children queued at once (not waiting on an unfinished parent), to kick or wake."""
        from pgkick.producer.enqueue import INSERT_CHUNK
        from pgkick.store import spawned

        store = self.store
        with store.exclusive(), store.transaction():  # the lease keeper waits meanwhile
            if job.id not in store.complete_many([job]):  # fenced: lost or cancelled
                return None
            inserted: list[QueuedJob] = []
            children: list[int] = []
            afters: list[tuple[tuple[int, str], ...]] = []
            for ids, specs in buffered:
                for start in range(0, len(ids), INSERT_CHUNK):
                    end = start + INSERT_CHUNK
                    inserted += spawned.insert_reserved(store, ids[start:end], specs[start:end])
                for child, spec in zip(ids, specs, strict=True):
                    if spec.after:
                        children.append(child)
                        afters.append(spec.after)
            waiting = dependencies.link(store, children, afters) if children else set()
        return [child for child in inserted if child.id not in waiting]


def due_and_later(children: list[QueuedJob], now: datetime) -> tuple[set[str], dict[str, datetime]]:
    """The queues of children due now (to kick), and each queue's first later due time (to
    book a wake-up for), as a producer's kick after commit decides (`due_by`: the children's
    run_at is the server's clock)."""
    due = {child.queue for child in children if due_by(child.run_at, now)}
    later: dict[str, datetime] = {}
    for child in sorted(children, key=lambda c: c.run_at):
        if child.run_at > now:
            later.setdefault(child.queue, child.run_at)
    return due, later


def _refuse_keys(specs: list[JobSpec]) -> None:
    for index, spec in enumerate(specs):
        if spec.unique_key is not None:
            option = "debounce" if spec.debounce else "throttle" if spec.throttle else "unique_key"
            raise InvalidArgument(
                f"spawn: jobs[{index}]: {option} cannot be used on a spawned job: its insert "
                "may answer with a job that exists already, and a spawned job's id is fixed "
                "when spawn returns; enqueue it with pgkick.enqueue_and_kick instead, or drop "
                "the key; nothing was spawned"
            )


def parents(store: WorkerStore, job: ClaimedJob) -> Callable[[], dict[int, Any]]:
    """JobContext.parent_results for `job`: one read of its parents' stored results."""

    def read() -> dict[int, Any]:
        return dependencies.parent_results(store, job.id)

    return read
