"""Fan-out from inside a task: children enqueued by a running job, released only by its
completion (issue 34).

Why not the worker's own completion transaction: a task runs with no transaction open
(invariant 4), and its job is completed later, batched with others, in a statement the
task cannot join. So the children are committed at once, on the worker's connection, but
each waits for the spawning attempt (a dependency bound to the attempt, migration 0017):
the attempt's completion releases them in its own transaction, and any other end of the
attempt (a failure, a retry, a lost lease, a crash reaped, a snooze) cancels them. A
crash mid-fan-out leaves cancelled children, never runnable ones, and the retry spawns
afresh: nothing runs unless the spawning run completed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pgkick.producer.enqueue import Enqueuer
from pgkick.store import dependencies
from pgkick.store.producer import ProducerStore
from pgkick.store.worker import ClaimedJob, WorkerStore


def spawner(
    store: WorkerStore, job: ClaimedJob
) -> Callable[[Iterable[Mapping[str, Any]]], list[int]]:
    """JobContext.spawn_many for `job`: enqueue_many's mappings, committed in one
    transaction on the worker's connection (the lease keeper's statements wait for it)."""

    def spawn_many(jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        with store.exclusive():
            producer = ProducerStore(store.conn, store.clock, schema=store.schema)
            enqueuer = Enqueuer(producer, spawner=(job.id, job.attempts))
            return enqueuer.enqueue_many(jobs)

    return spawn_many


def parents(store: WorkerStore, job: ClaimedJob) -> Callable[[], dict[int, Any]]:
    """JobContext.parent_results for `job`: one read of its parents' stored results."""

    def read() -> dict[int, Any]:
        return dependencies.parent_results(store, job.id)

    return read
