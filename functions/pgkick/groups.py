"""Ordered groups and per-queue running limits: how the claim keeps them under SKIP LOCKED.

The rules (all in `sql/job_claim.sql`):
- A job enqueued with `group=` runs only when no other job of its group (same queue)
  is running, and only if it is the group's head: its first queued job in the
  claim's own order (priority DESC, run_at, id), so with equal priorities a group
  runs in run_at order; the same order as the claim's scan means the first job of
  a group the scan meets is its head, and the claim stays cheap. A job waiting
  for its retry (queued with attempts > 0) is the head whatever its order, so a
  failure holds its group until it is retried or fails for good. Other groups
  and ungrouped jobs are claimed around it: a blocked group blocks nobody else.
- A queue with a row in `queue_limits` never has more than `max_running` jobs
  running: a claim takes at most max_running - running.

Why SKIP LOCKED alone cannot enforce either: every claimer reads the queue in its
own statement snapshot and skips rows others hold. Two claimers whose snapshots
both predate the other's commit each see "no job of g running" and "2 running of
a limit of 3", and both claim. The head rule narrows this but does not close it:
job 1 of g may commit after job 2 (ids and commits out of order); B claims job 2
(its snapshot lacks job 1), and A, whose snapshot has job 1 but not B's
uncommitted claim, takes job 1 as the idle group's head. Both run.

The serialisation point: `job_claim_serialise` runs first in the claim's
transaction and, when the queue has a limit or live grouped jobs, takes a
transaction-scoped advisory lock on the queue (pg_advisory_xact_lock). It is held
until the claim commits. Under READ COMMITTED each statement takes a fresh
snapshot, and the claim statement starts only after the lock is granted, so its
snapshot contains every claim committed before it, and no other claim of the
queue is in progress: "running" is exact. Jobs leave `running` (complete, fail,
reaper) without the lock; that only frees room, and the claim that missed it
errs on the side of claiming less. The serialise statement marks its transaction
(`set_config('pgkick.claim_serialised', 'on', true)`); the claim claims grouped
jobs, and jobs of a limited queue, only when that mark is set, so a claim whose
serialise check ran before the queue's first grouped job or limit committed takes
neither and cannot slip past the lock.

Cost: claims of a queue with groups or a limit wait for one another (each holds
the lock for one short statement, never while a job runs); queues without either
never take the lock and pay two index probes. The ready checks (`job_ready_exists`
for a worker's hand-over, `job_ready_count_by_queue` for the reaper's kicks) apply
the same head rule, so a blocked group's jobs kick nobody; the worker finishing the
group's running job claims the next one. Those two statements repeat the head rule
of `job_claim`: a change to one is a change to all three.
"""

from __future__ import annotations

from pgkick import queries
from pgkick.db import Database
from pgkick.validation import check_name

MAX_LIMIT = 2**31 - 1


def set_queue_limit(db: Database, queue: str, max_running: int | None) -> None:
    """At most `max_running` jobs of `queue` run at once; None removes the limit.
    Bad input raises (ValueError/TypeError) before anything is written."""
    check_name("queue", queue)
    if max_running is None:
        db.execute(queries.QUEUE_LIMIT_CLEAR, queue=queue)
        return
    if isinstance(max_running, bool) or not isinstance(max_running, int):
        raise TypeError(f"max_running: must be an integer, got {type(max_running).__name__}")
    if not 1 <= max_running <= MAX_LIMIT:
        raise ValueError(f"max_running: {max_running} is outside 1..{MAX_LIMIT} (None: no limit)")
    db.execute(queries.QUEUE_LIMIT_SET, queue=queue, max_running=max_running)


def queue_limits(db: Database) -> list[tuple[str, int, int]]:
    """(queue, max_running, running now) for every limited queue."""
    return [(row[0], row[1], row[2]) for row in db.rows(queries.QUEUE_LIMIT_LIST)]
