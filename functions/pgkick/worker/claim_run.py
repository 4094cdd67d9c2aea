"""One claim's jobs run and each outcome recorded as it ends: the worker's inner loop.

Why apart from the loop (pgkick.worker.loop): the loop decides when to claim, linger,
hand over and leave; this decides, job by job, what the outcome writes: nothing for a
job whose lease was lost (fenced), a failure at once, a snooze or continuation, a job
given back when the invocation reached its reserve, and successes gathered to be
completed together (flushed every FLUSH_AFTER_SECONDS of a slow claim, so a crash
re-runs little). Suspects (migration 0035) are started here, what ran before them
recorded first.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick.tasks.registry import Registry
from pgkick.worker.batch_run import run_jobs
from pgkick.worker.continuation import StepBooks
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.options import Summary, WorkerOptions
from pgkick.worker.outcomes import Outcomes
from pgkick.worker.spawn import Spawns
from pgkick.worker.task_run import CANCELLED

FLUSH_AFTER_SECONDS = 0.5  # complete finished jobs at once when a batch runs longer


class ClaimRun:
    """A drain's runner of its claims (one a drain: its step books, spawns and outcomes)."""

    def __init__(
        self,
        registry: Registry,
        store: WorkerStore,
        options: WorkerOptions,
        books: StepBooks,
        spawns: Spawns,
        outcomes: Outcomes,
    ) -> None:
        self.registry, self.store, self.options = registry, store, options
        self.books, self.spawns, self.outcomes = books, spawns, outcomes
        # the drain's clock: no job starts once it is below the reserve (None: never)
        self.remaining_ms: Callable[[], int] | None = None

    def run(
        self,
        jobs: list[ClaimedJob],
        keeper: LeaseKeeper,
        summary: Summary,
        pending: list[ClaimedJob] | None = None,
    ) -> list[ClaimedJob]:
        """Run held jobs; failures are recorded at once, successes returned to be completed
        (with `pending`, successes run before and not yet recorded).

        A suspect (a job whose last attempt's worker vanished: it may kill this one too) is
        started by `start_lapsed`: what succeeded so far is completed first, so a job run
        beside it is recorded, not charged, if it does; then the suspect is marked started,
        so the reaper charges it if its lease lapses again (migration 0035)."""
        finished: list[ClaimedJob] = list(pending or ())
        last_flush = time.monotonic()
        books, spawns, outcomes = self.books.book, self.spawns, self.outcomes
        # no job starts once the invocation is down to its reserve: Lambda's timeout would
        # cut it, and strand it and the rest of the claim `running` until their lease ends
        reserve = self.options.min_remaining.total_seconds() * 1000
        remaining_ms = self.remaining_ms
        late = (lambda: remaining_ms() < reserve) if remaining_ms is not None else lambda: False

        def start_lapsed(suspects: list[ClaimedJob]) -> None:
            nonlocal finished, last_flush
            outcomes.complete(finished, keeper, summary)
            finished, last_flush = [], time.monotonic()
            held = self.store.start_lapsed(suspects)
            if len(held) < len(suspects):
                keeper.mark_lost([job for job in suspects if job.id not in held])

        ran = run_jobs(self.registry, jobs, keeper, books, spawns, late, start_lapsed)
        for job, outcome in ran:
            # the children it spawned: written only with its completion, else dropped
            buffered = spawns.take(job) if spawns is not None else None
            if keeper.is_lost(job.id):
                summary.lost += 1  # someone else's now: no write at all
                keeper.release(job.id)
            elif keeper.is_cancelled(job.id):  # whatever the task did: the operator's word
                outcomes.fail(job, CANCELLED, True, summary)
                keeper.release(job.id)
            elif outcome.unstarted:  # out of time: back to the queue, handed over
                outcomes.give_back(job, keeper, summary)
            elif outcome.snooze is not None:
                outcomes.snooze(job, outcome.snooze, keeper, summary)
            elif outcome.continued:
                if not self.books.continue_job(job, outcome, keeper, summary):
                    outcomes.cancelled_late(job, summary)
            elif outcome.error is None:  # (a new tuple: only for a result)
                done = job if outcome.result is None else job._replace(result=outcome.result)
                if buffered:  # completed alone, with its children (pgkick.worker.spawn)
                    outcomes.complete_spawning(done, buffered, keeper, summary)
                else:
                    finished.append(done)
            else:
                outcomes.fail(job, outcome.error, outcome.permanent, summary)
                keeper.release(job.id)
            if finished and time.monotonic() - last_flush > FLUSH_AFTER_SECONDS:
                outcomes.complete(finished, keeper, summary)
                finished, last_flush = [], time.monotonic()
        return finished
