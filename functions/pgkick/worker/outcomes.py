"""What a job's ending writes, and what that write sets in motion.

Why apart from the loop (pgkick.worker.loop): the loop decides when to claim, linger,
hand over and leave; this decides what one ending records, fenced by the job's attempt,
and who must hear of it afterwards: a retry's or a snooze's wake-up, the dependants a
completion or a final failure released (kicked one hop further down the chain), a
spawner's children (written with its completion, pgkick.worker.spawn). Every write here
is fenced: a job whose lease was taken over counts as lost and nothing of it is kicked.
One `Outcomes` per drain: it carries that invocation's hop and its spawn buffers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from pgkick.connections.db import DatabaseError
from pgkick.kick.kickers import Kicker
from pgkick.store.worker import ClaimedJob, WorkerStore
from pgkick.tasks.registry import describe_error
from pgkick.worker.dependants import kick_released, released_by_failure
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.options import Summary, WorkerOptions
from pgkick.worker.spawn import Buffered, Spawns, due_and_later

log = logging.getLogger("pgkick.worker")


class Outcomes:
    def __init__(
        self,
        store: WorkerStore,
        kicker: Kicker,
        options: WorkerOptions,
        *,
        jitter: Callable[[], float],
        hop: int,
        spawns: Spawns,
    ) -> None:
        self.store = store
        self.kicker = kicker
        self.options = options
        self.jitter = jitter  # a retry's backoff factor (pgkick.worker.options.backoff_jitter)
        self.hop = hop  # the invocation's place in its chain: its kicks go one further
        self.spawns = spawns

    def complete(self, finished: list[ClaimedJob], keeper: LeaseKeeper, summary: Summary) -> None:
        if finished:
            self.account(finished, self.store.complete_many(finished), keeper, summary)
            self.kick_dependants(finished[0].queue, self.store.take_released(), summary)

    def complete_spawning(
        self, job: ClaimedJob, buffered: list[Buffered], keeper: LeaseKeeper, summary: Summary
    ) -> None:
        """Complete a job that spawned children, in its own transaction with their inserts
        (pgkick.worker.spawn), then kick their queues (one hop further, as for released
        dependants: this worker's own queue is its next claim's) or book their wake-ups."""
        try:
            queued = self.spawns.complete(job, buffered)
        except DatabaseError as exc:  # rolled back: neither the complete nor any child
            self.store.take_released()  # noted by the rolled-back complete: not released
            keeper.release(job.id)
            self.fail(job, "spawn: " + describe_error(exc), False, summary)
            return
        self.account([job], set() if queued is None else {job.id}, keeper, summary)
        if not queued:
            self.kick_dependants(job.queue, self.store.take_released(), summary)
            return
        due, later = due_and_later(queued, self.store.clock() or datetime.now(UTC))
        self.kick_dependants(job.queue, self.store.take_released() | due, summary)
        for queue, run_at in later.items():
            summary.wake_failures += int(not self.wake(job._replace(queue=queue), run_at))

    def kick_dependants(self, queue: str, released: set[str], summary: Summary) -> None:
        """Kick the other queues where jobs waiting on this worker's jobs became ready, one
        hop further down this invocation's chain (see pgkick.worker.dependants)."""
        if released:
            summary.dependant_kicks += kick_released(
                self.store,
                self.kicker,
                released,
                skip=queue,
                pending=self.options.kick_pending,
                hop=self.hop + 1,
                max_hops=self.options.max_hops,
                failed_wake=self.options.failed_kick_wake,
                safety=self.options.kick_safety,
            )

    def account(
        self, finished: list[ClaimedJob], held: set[int], keeper: LeaseKeeper, summary: Summary
    ) -> None:
        """Count what a batch complete did: done if still held, lost if taken over."""
        summary.done += len(held)
        summary.lost += len(finished) - len(held)
        keeper.release_many([job.id for job in finished])

    def fail(self, job: ClaimedJob, error: str, permanent: bool, summary: Summary) -> None:
        outcome = self.store.fail(
            job.id,
            job.attempts,
            error,
            permanent=permanent,
            backoff=self.options.backoff,
            backoff_cap=self.options.backoff_cap,
            jitter=self.jitter(),
        )
        extra = {"job_id": job.id, "queue": job.queue, "attempt": job.attempts}
        if outcome.has_dependants:
            self.kick_dependants(job.queue, released_by_failure(self.store, job.id), summary)
        if not outcome.owned:
            summary.lost += 1
        elif outcome.status == "queued" and outcome.run_at is not None:
            summary.retried += 1
            log.warning(
                "job %s failed, retry at %s: %s",
                job.id,
                outcome.run_at.isoformat(),
                error,
                extra=extra,
            )
            summary.wake_failures += int(not self.wake(job, outcome.run_at))
        else:
            summary.failed += 1
            log.error("job %s failed for good: %s", job.id, error, extra=extra)

    def snooze(
        self, job: ClaimedJob, seconds: float, keeper: LeaseKeeper, summary: Summary
    ) -> None:
        """Back to the queue with the attempt given back, and a wake-up booked for it."""
        keeper.forget(job.id)  # the next claim reuses this attempt number: never extend again
        snoozed = self.store.snooze(job.id, job.attempts, seconds)
        if snoozed is None:
            summary.lost += 1
            return
        if snoozed.cancelled:  # a cancel since the last heartbeat: the job failed instead
            self.cancelled_late(job, summary)
            return
        summary.snoozed += 1
        summary.wake_failures += int(not self.wake(job, snoozed.run_at))

    def give_back(self, job: ClaimedJob, keeper: LeaseKeeper, summary: Summary) -> None:
        """A claimed job not started (the invocation reached its reserve first): back to the
        queue, due now, its attempt given back (fenced: the snooze's statement, 0 seconds),
        for the invocation the hand-over kicks. No wake-up: it is due at once."""
        keeper.forget(job.id)  # the next claim reuses this attempt number: never extend again
        given = self.store.snooze(job.id, job.attempts, 0)
        if given is None:
            summary.lost += 1
        elif given.cancelled:  # a cancel since the last heartbeat: the job failed instead
            self.cancelled_late(job, summary)

    def cancelled_late(self, job: ClaimedJob, summary: Summary) -> None:
        """A snooze or a continuation that failed the job instead (a cancel since the last
        heartbeat): its "run anyway" dependants entered their queues in that statement, and
        are kicked as a failure's are (one read: this happens only after a cancel)."""
        summary.failed += 1
        self.kick_dependants(job.queue, released_by_failure(self.store, job.id), summary)

    def wake(self, job: ClaimedJob, run_at: datetime) -> bool:
        try:
            self.kicker.wake_at(job.queue, run_at)
        except Exception:
            extra = {"job_id": job.id, "queue": job.queue}
            log.exception(
                "no wake-up for job %s: a kick or the reaper runs it", job.id, extra=extra
            )
            return False
        return True
