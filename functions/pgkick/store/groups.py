"""Ordered groups and per-queue running limits: how the claim keeps them under SKIP LOCKED.

The rules (all in the claim, `job_claim`, a server-side function: migrations 0007, 0011):
- A job enqueued with `group=` runs only when no other job of its group (same queue)
  is running, and only if it is the group's head: its first queued job in the
  group's order (priority DESC, ordered_at, id). `ordered_at` is the run_at the job
  was enqueued with (set on insert by a trigger, 0011) and nothing moves it: a job
  waiting for its retry, or snoozed, keeps its place, stays the head and holds its
  group until it runs again (and, for a failure, until it is retried or fails for
  good); `pgkick retry` of several failed jobs of a group runs them in the group's
  order. The head is unique (the order ends on id), so one claim takes at most one
  job of a group, whatever its batch. With equal priorities a group runs in the
  order of the run_at its jobs were enqueued with. Other groups
  and ungrouped jobs are claimed around it: a blocked group blocks nobody else.
  (Before 0011 the head was the first in claim order (priority, run_at, id), or any
  queued job with attempts > 0: a retry of three failed jobs made three heads, one
  batch ran them together, and a job snoozed on its first attempt, its attempts
  back to 0 and its run_at later, let the next one of its group overtake it.)
- A queue with a row in `queue_limits` never has more than `max_running` jobs
  running: a claim takes at most max_running - running.
- Since 0014 the locked branch also reads the queue's pause, rate and concurrency per
  key (pgkick.store.flow has those rules): paused, it claims nothing; with a rate or a
  concurrency, it claims round-robin across keys; else as below, unchanged.

Why SKIP LOCKED alone cannot enforce either: every claimer reads the queue in its
own statement snapshot and skips rows others hold. Two claimers whose snapshots
both predate the other's commit each see "no job of g running" and "2 running of
a limit of 3", and both claim. The head rule narrows this but does not close it:
job 1 of g may commit after job 2 (ids and commits out of order); B claims job 2
(its snapshot lacks job 1), and A, whose snapshot has job 1 but not B's
uncommitted claim, takes job 1 as the idle group's head. Both run.

So the claim has two branches, chosen by a check in its own snapshot:
- The queue has no limit and no live (queued or running) grouped job: claim
  ungrouped jobs only, no lock (as the claim was before groups). A grouped job or
  a limit committed after the check is seen by the next claim; a grouped job is
  never claimed on this branch, whatever the check missed. Only a claim whose
  check predates a new limit's commit can take past that limit (a claim in flight
  when the limit is set).
- Else: take a transaction-scoped advisory lock on the queue
  (pg_advisory_xact_lock, held until the claim's transaction ends: in autocommit,
  the one statement), then claim with the group and limit rules. The function is
  VOLATILE: under READ COMMITTED each statement in it takes a fresh snapshot, and
  the claiming statement starts only after the lock is granted, so it sees every
  claim committed before it, and no other locked claim of the queue is in
  progress (a claim on the first branch takes no grouped job and sees no limit):
  "running" is exact. Jobs leave `running` (complete, fail, reaper) without the
  lock; that only frees room, and a claim that missed it errs on the side of
  claiming less. Under another isolation level the claiming statement would keep
  the transaction's first snapshot, taken before the lock: the locked branch
  refuses to run there (an error naming the level).

Cost: claims of a queue with groups or a limit wait for one another (each holds
the lock for one short statement, never while a job runs). Either branch is one
statement from the client, and the server plans its inner statements once per
session (PL/pgSQL's plan cache, forced generic; no statement names cross the wire,
so transaction-mode poolers are fine): before 0007 the claim was planned at every
call (pgkick prepares nothing, for poolers), and with groups it was four statements
(BEGIN, the lock, the claim, COMMIT), 1.7x the claim before 0004; now about 1.0x
without groups, 1.1x with priorities and groups (`pgkick bench --items
claim_order`, the README's "Cost" bullet has the figures). Generic plans know no
parameter values, hence the claim's shape: the update finds its rows by
`id = ANY (ARRAY (...))` (a join would be planned for a tenth of the table);
tests/test_claim.py checks both branches' plans.

The ready checks (`job_ready_exists` for a worker's hand-over,
`job_ready_count_by_queue` for the reaper's kicks) apply the same head rule, so a
blocked group's jobs kick nobody; the worker finishing the group's running job
claims the next one. Those two statements repeat the head rule of `job_claim`:
a change to one is a change to all (the claim's, in a new migration).
"""

from __future__ import annotations

from typing import Any

from pgkick.connections.db import Database
from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.store import queries
from pgkick.validation import check_name

MAX_LIMIT = 2**31 - 1


def check_count(field: str, value: object, remove: str = "pass None to remove it") -> int:
    """A limit's count, 1..MAX_LIMIT (running jobs, a rate's jobs, a concurrency), else
    InvalidArgument naming it and `remove`: how the caller takes a limit away (the API's
    None; the CLI says its own option)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentType(f"{field}: must be an integer, got {type(value).__name__}")
    if not 1 <= value <= MAX_LIMIT:
        raise InvalidArgument(f"{field}: {value} is outside 1..{MAX_LIMIT} ({remove})")
    return value


def set_queue_limit(db: Database, queue: str, max_running: int | None) -> None:
    """At most `max_running` jobs of `queue` run at once; None removes the limit.
    Bad input raises (ValueError/TypeError) before anything is written."""
    check_name("queue", queue)
    if max_running is None:
        db.execute(queries.QUEUE_LIMIT_CLEAR, queue=queue)
        db.execute(queries.QUEUE_LIMIT_PRUNE, queue=queue)  # nothing else limited: no row
        return
    check_count("max_running", max_running)
    db.execute(queries.QUEUE_LIMIT_SET, queue=queue, max_running=max_running)


def queue_limits(db: Database) -> list[dict[str, Any]]:
    """Every queue with a row: its running limit, jobs running now, rate (jobs per period in
    seconds), concurrency per group key and pause (pgkick.store.flow); None: not set."""
    names = ("queue", "max_running", "running", "rate", "rate_period_seconds", "concurrency")
    return [
        {**dict(zip(names, row[:6], strict=True)), "paused": bool(row[6])}
        for row in db.rows(queries.QUEUE_LIMIT_LIST)
    ]
