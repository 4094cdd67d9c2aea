"""Flow control enforced in the claim: rates per key, concurrency per group key, pause.

The rules (all in `job_claim`, migration 0014; pgkick.store.groups has the claim lock's
reasoning, which these rules reuse):
- Rate: a queue with a rate (`set_queue_rate(db, queue, 10, timedelta(minutes=1))`) starts
  at most 10 jobs of each rate key (`rate_key=` on enqueue; jobs without one share the
  queue's own key) in any sliding minute. Each claim records its starts (`job_starts`)
  under the queue's claim lock, so concurrent workers see each other's starts: the
  limit is counted, never sampled (in two index probes a key: a key's starts are
  numbered in the order of their times, migration 0022; in one while the last start's
  recorded bound leaves the key room, migration 0023). A job over the limit stays
  queued; other keys are claimed around it. A worker that finds only held jobs leaves
  (pgkick.worker.loop), and its sweep books a wake-up at the instant the window admits
  the next job (queue_heal_plan).
- Concurrency: a queue with a concurrency N runs at most N jobs of one group key at once,
  the group's first N queued jobs in its fixed order (0011's head rule; N=1 is today's
  ordered group). Such a queue (and any queue with a rate) is claimed round-robin: a lap
  over its keys (a group key, else a rate key, then the jobs with neither) takes one job
  a key, starting after the key the last claim took from, then a second lap fills the
  batch. A key's backlog of 100,000 jobs thus delays another key's single job by at most
  one batch. Across keys the order is the keys', not the priorities' (priority orders a
  key's own jobs); a queue with neither setting keeps the claim's priority order.
- Pause: a paused queue's claim takes nothing (a worker already running sees it at its
  next claim and leaves), producers and sweeps do not kick it; `resume_queue`'s caller
  kicks it (pgkick.cli).
- Loosened: a rate removed or raised, or a concurrency raised, over queued jobs frees jobs
  the old limit held; the setter says so (True) and its caller kicks the queue, as after
  a resume (pgkick.cli), or they wait for the wake-up booked under the old limit.

Bad input raises before anything is written (InvalidArgument / InvalidArgumentType).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pgkick.connections.db import Database
from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.store import queries
from pgkick.store.groups import check_count
from pgkick.validation import check_name

MIN_RATE_PERIOD = timedelta(seconds=1)  # the schema's bounds (0014's check constraint)
MAX_RATE_PERIOD = timedelta(days=1)


def check_rate(
    limit: object, period: object, remove: str = "pass None to remove it"
) -> tuple[int, timedelta]:
    """At least 1 job per period of 1 s..1 day: anything else names what is wrong (and, for
    a count out of range, `remove`: how the caller takes the rate away)."""
    count = check_count("rate", limit, remove)
    if not isinstance(period, timedelta):
        raise InvalidArgumentType(f"rate period: must be a timedelta, got {type(period).__name__}")
    if not MIN_RATE_PERIOD <= period <= MAX_RATE_PERIOD:
        raise InvalidArgument(
            f"rate period: {period} is outside {MIN_RATE_PERIOD}..{MAX_RATE_PERIOD} "
            "(a shorter one is not measured by a claim, a longer one is a quota, not a rate)"
        )
    return count, period


def _prune(db: Database, queue: str) -> None:
    db.execute(queries.QUEUE_LIMIT_PRUNE, queue=queue)


KEEP: Literal["keep"] = "keep"  # loosens(): this setting is not changed


def loosens(
    db: Database,
    queue: str,
    *,
    rate: tuple[int, timedelta] | Literal["keep"] | None = KEEP,
    concurrency: int | Literal["keep"] | None = KEEP,
) -> bool:
    """Whether setting `rate` ((count, period); None: removed) and `concurrency` frees jobs
    of `queue` the current settings may hold: a rate removed, more starts or a shorter
    period; a concurrency above the current one (a group without one runs one job at a
    time); and jobs queued. Its caller kicks the queue once the change is committed.

    Why: a job held by its rate waits for the wake-up its worker's sweep booked at the
    instant the old window admitted it (up to a day later), and nothing else runs in the
    queue to heal it sooner: `pgkick limit Q --no-rate` freed jobs a claim would take at
    once, and they waited a day (a review, 2026-12-10)."""
    old_rate, old_period, old_concurrency, queued = db.rows(
        queries.QUEUE_LIMIT_FLOW_GET, queue=queue
    )[0]
    if not queued:
        return False
    if old_rate is not None and (
        rate is None or (isinstance(rate, tuple) and (rate[0] > old_rate or rate[1] < old_period))
    ):
        return True
    return isinstance(concurrency, int) and concurrency > (old_concurrency or 1)


def set_queue_rate(
    db: Database, queue: str, limit: int | None, period: timedelta | None = None
) -> bool:
    """At most `limit` jobs of each rate key of `queue` start per sliding `period`;
    None removes the rate. True when the change frees jobs the old rate held (`loosens`):
    the caller kicks the queue (pgkick.cli does), as after `resume_queue`."""
    check_name("queue", queue)
    if limit is None:
        freed = loosens(db, queue, rate=None)
        db.execute(queries.QUEUE_LIMIT_RATE_SET, queue=queue, rate_limit=None, rate_period=None)
        _prune(db, queue)
        return freed
    count, span = check_rate(limit, period)
    freed = loosens(db, queue, rate=(count, span))
    db.execute(queries.QUEUE_LIMIT_RATE_SET, queue=queue, rate_limit=count, rate_period=span)
    return freed


def set_queue_concurrency(db: Database, queue: str, concurrency: int | None) -> bool:
    """At most `concurrency` jobs of one group key of `queue` run at once, claimed
    round-robin across keys; None removes it (groups run one at a time, in priority order).
    True when the change frees jobs the old concurrency held (`loosens`): the caller kicks
    the queue (pgkick.cli does), as after `resume_queue`."""
    check_name("queue", queue)
    if concurrency is None:
        db.execute(queries.QUEUE_LIMIT_CONCURRENCY_SET, queue=queue, concurrency=None)
        _prune(db, queue)
        return False  # one job a group at a time: no more than any concurrency allowed
    count = check_count("concurrency", concurrency)
    freed = loosens(db, queue, concurrency=count)
    db.execute(queries.QUEUE_LIMIT_CONCURRENCY_SET, queue=queue, concurrency=count)
    return freed


def pause_queue(db: Database, queue: str) -> None:
    """Claims of `queue` take nothing until it is resumed (jobs stay queued)."""
    check_name("queue", queue)
    db.execute(queries.QUEUE_PAUSE_SET, queue=queue, paused=True)


def resume_queue(db: Database, queue: str) -> bool:
    """Claims of `queue` take its jobs again; the caller kicks it (pgkick.cli). False, and
    nothing written, when the queue was not paused."""
    check_name("queue", queue)
    if not db.rows(queries.QUEUE_RESUME, queue=queue):
        return False
    _prune(db, queue)
    return True
