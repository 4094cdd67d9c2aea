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

The plain claim (`sql/job_claim_plain.sql`, what a worker sends first): one
statement, in autocommit its own transaction, as the claim was before groups. In
its own snapshot it checks whether the queue has a limit or live (queued or
running) grouped jobs; if it has neither, it claims ungrouped jobs only (a grouped
job is never claimed without the lock, whatever the snapshot missed); if it has
either, it claims nothing and says so, and the store takes the serialised claim
below, and keeps taking it for that queue until the serialise check finds no
reason left (`JobStore.claims_serialised`). So a grouped job or a limit that
appears while a worker drains by the plain claim is seen by its next claim, and
grouped jobs are never starved. Only a claim whose snapshot predates a new
limit's commit can take past that limit, as before (a claim in flight when the
limit is set). The worker pipelines the plain claim after the completion of its
last batch: one round trip, one commit.

The serialisation point: `job_claim_serialise` runs first in the claim's
transaction and, when the queue has a limit or live grouped jobs, takes a
transaction-scoped advisory lock on the queue (pg_advisory_xact_lock). It is held
until the claim commits. Under READ COMMITTED each statement takes a fresh
snapshot, and the claim statement starts only after the lock is granted, so its
snapshot contains every claim committed before it, and no other serialised claim of
the queue is in progress (a plain claim in progress takes no grouped job, and sees
no limit: see above): "running" is exact. Jobs leave `running` (complete, fail,
reaper) without the lock; that only frees room, and the claim that missed it
errs on the side of claiming less. The serialise statement marks its transaction
(`set_config('pgkick.claim_serialised', 'on', true)`); the claim claims grouped
jobs, and jobs of a limited queue, only when that mark is set, so a claim whose
serialise check ran before the queue's first grouped job or limit committed takes
neither and cannot slip past the lock.

Cost: claims of a queue with groups or a limit wait for one another (each holds
the lock for one short statement, never while a job runs), and send four
statements (BEGIN, the check, the claim, COMMIT) in one round trip; queues with
neither never take the lock and send one statement, the plain claim, whose check
is three index probes. Measured by `pgkick bench --items claim_order` (claim of 10
+ complete at a 100,000-job backlog, ratio to the claim before 0004 within each
round; the README's "Cost" bullet has the figures): the plain claim costs about
1.2-1.3x, the serialised claim with priorities and groups about 1.7x. Most of either
is the server planning the statement on every run (pgkick never prepares, for
transaction-mode poolers), on a table with more (partial) indexes than before 0004:
on it, EXPLAIN ANALYZE gave the plain claim 0.25 ms of planning and 0.04 ms of
execution; the serialised claim 0.5 ms and 0.35 ms, its check 0.1 ms and 0.02 ms.
The ready checks (`job_ready_exists` for a worker's hand-over,
`job_ready_count_by_queue` for the reaper's kicks) apply the same head rule, so a
blocked group's jobs kick nobody; the worker finishing the group's running job
claims the next one. Those two statements repeat the head rule of `job_claim`
(and `job_claim_plain` never claims a grouped job): a change to one is a change
to all.
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
