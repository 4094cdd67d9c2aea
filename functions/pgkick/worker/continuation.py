"""Durable steps on the worker's side: each job's step book, and a continuation recorded.

Why here, not in the loop: a task that takes its JobContext gets a step book
(pgkick.tasks.steps) bound to the worker's connection, the invocation's own clock (the
Lambda context's remaining time, the clock the loop already budgets batches with) and
the worker's reserve (PGKICK_MIN_REMAINING_MS: the time kept to record outcomes and hand
over). When a step would not fit, the task raises Continuation; the worker then puts the
job back in the queue, due now, the attempt given back (pgkick.store.steps), and stops
claiming: its hand-over (withdraw, then kick the queue if work is ready) starts the fresh
invocation that replays the finished steps and runs the rest. A 2-hour job of 5-minute
steps so finishes on Lambda in 15-minute invocations, each billed only for work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick.tasks.steps import Steps
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.options import Summary

if TYPE_CHECKING:
    from pgkick.worker.task_run import TaskOutcome

log = logging.getLogger("pgkick.worker")


class StepBooks:
    """Makes the step book of each job one drain runs."""

    def __init__(
        self, store: WorkerStore, remaining_ms: Callable[[], int], reserve: timedelta
    ) -> None:
        self.store = store
        self.remaining_ms = remaining_ms
        self.reserve_ms = reserve.total_seconds() * 1000
        self.continued = False  # a job of this drain continued: claim no more, hand over

    def book(self, job: ClaimedJob) -> Steps:
        """Cheap: the job's steps are read at its first step, not here."""
        return Steps(
            self.store,
            job.id,
            job.attempts,
            remaining_ms=self.remaining_ms,
            reserve_ms=self.reserve_ms,
        )

    def continue_job(
        self, job: ClaimedJob, outcome: TaskOutcome, keeper: LeaseKeeper, summary: Summary
    ) -> bool:
        """Record a continuation (fenced), and a stalled one's time left; the loop hands the
        queue over after this batch. False when a cancel since the last heartbeat failed the
        job instead (the caller counts it and kicks its released dependants)."""
        keeper.forget(job.id)  # the next claim reuses this attempt number: never extend again
        status = self.store.continue_job(
            job.id, job.attempts, stalled=outcome.stalled, left_ms=outcome.left_ms
        )
        if status is None:
            summary.lost += 1
            return True
        if status != "queued":  # a cancel since the last heartbeat: the job failed instead
            return False
        summary.continued += 1
        self.continued = True
        log.info(
            "job %s continues in a fresh invocation",
            job.id,
            extra={"job_id": job.id, "queue": job.queue, "attempt": job.attempts},
        )
        return True
