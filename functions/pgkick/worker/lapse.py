"""A busy worker acts on its own lapse: the kick a producer did not send, sent at the lapse.

Why: a worker's announcement (pgkick.kick.watch) promises its next claim within
PGKICK_WATCH_SECONDS, and a producer committing while it holds sends no kick (nor books a
safety wake-up). A batch that runs past its promise (one long task, or many) left such a
job waiting for that worker's next claim, the end of its batch: up to the invocation's
timeout (15 minutes on Lambda), unless a later commit after the lapse kicked another worker.
Measured with PGKICK_WATCH_SECONDS=1: a job committed 0.2 s into a 4 s task was claimed
3.8 s after its commit. Only this worker knows when its promise ends, so it acts on it: once
per promise, at the lapse, it asks whether its queue has a job a claim could take now
(`job_ready_exists`: held jobs, a paused queue, groups behind a running head do not count)
and, if so, reserves the kick as a producer does (`queue_kick_reserve`: nobody else watches,
no kick pending, so of racing producers and sweeps one kicks) and kicks one worker as a
hand-over does (reason `rekick`, its hop + 1, a wake-up past PGKICK_MAX_HOPS). A kick that
fails is healed as every sender heals it (pgkick.kick.safety.wake_after_failed_kick: its
reservation released, a wake-up booked). Every job committed before the lapse is seen by
that check (it runs after the lapse); every producer committing after it kicks by itself.

Why the heartbeat's thread (pgkick.worker.lease) and not the loop between jobs: the
documented case is one long task, which has no "between jobs"; the heartbeat already runs
while tasks run, only while the worker holds jobs, and sends its statements on the shared
connection under the Database's lock (one statement or pipeline at a time), as its lease
extensions do. It waits for the lapse itself, not for its next beat.

What it costs: nothing for a batch that ends within its promise (the common case: the next
claim renews it) and nothing while the worker lingers or is idle (it holds no job then);
one read at a lapse, and a reservation and a kick only when a job is ready. A job ready at
the lapse with its worker still busy is the only thing that sends a kick.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import partial

from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.kick.safety import kick_or_wake, wake_after_failed_kick
from pgkick.kick.watch import WorkerWatch
from pgkick.store.worker import WorkerStore

log = logging.getLogger("pgkick.lapse")
# Acted on this long after the promise: the promise is the worker's clock, the row's `until`
# the server's, and the check must see its own row lapsed. The worker's promise is read after
# the claim returns (never earlier than `until`); the margin covers the two clocks' rates
# differing over a watch window (NTP slews at most 0.05% of 5 s: 2.5 ms), so a check at the
# lapse never finds its own announcement still valid and leaves the job to the batch's end.
SLACK_SECONDS = 0.05


class LapseKick:
    """One drain's watch on its own announcement (a plain class: pgkick.kick.throttle.Backoff
    says why). The loop sets the promise (WorkerWatch.announced); the heartbeat's thread asks
    `seconds_left` and calls `check`."""

    __slots__ = (
        "_acted",
        "failed_wake",
        "hop",
        "kicker",
        "kicks",
        "max_hops",
        "pending",
        "queue",
        "safety",
        "store",
        "watch",
    )

    def __init__(
        self,
        store: WorkerStore,
        kicker: Kicker,
        queue: str,
        watch: WorkerWatch,
        *,
        pending: timedelta,
        safety: timedelta,
        failed_wake: timedelta,
        hop: int,
        max_hops: int,
    ) -> None:
        """hop: the kick's (the drain's hop + 1)."""
        self.store, self.kicker, self.queue, self.watch = store, kicker, queue, watch
        self.pending, self.safety, self.failed_wake = pending, safety, failed_wake
        self.hop, self.max_hops = hop, max_hops
        self._acted: float | None = None  # the promise already acted on
        self.kicks = 0

    def _open_promise(self) -> float | None:
        """The promise in force, read once (the loop may renew it meanwhile), if there is
        one to act on: not acted on yet, and a kick could be sent."""
        promise = self.watch.promise
        if promise is None or promise == self._acted or isinstance(self.kicker, NoKicker):
            return None
        return promise

    def seconds_left(self) -> float | None:
        """Seconds until the promise in force lapses (0: it has), None when there is nothing
        to act on (no promise, or this one was acted on, or no kick could be sent)."""
        promise = self._open_promise()
        return None if promise is None else max(0.0, promise + SLACK_SECONDS - self.watch.clock())

    def check(self) -> bool:
        """At a lapsed promise not acted on yet: kick for a ready job (True: kicked). Once per
        promise, whatever happens: a failed statement is not retried (the worker's next
        claim, or its exit, still sees the job). Raises as the store raises."""
        promise = self._open_promise()
        if promise is None or self.watch.clock() < promise + SLACK_SECONDS:
            return False
        self._acted = promise
        if not self.store.ready_exists(self.queue):
            return False
        if self.queue not in self.store.reserve_kicks([self.queue], self.pending):
            return False  # another worker watches, or a kick is on its way
        log.info("announcement on queue %s lapsed during a batch: kicking for a job", self.queue)
        release = partial(self.store.release_kick, self.queue)
        if self.hop > self.max_hops:  # as a hand-over: a fresh chain from the scheduler
            try:
                self.kicker.wake_at(self.queue, datetime.now(UTC))
            except Exception as exc:
                log.warning("could not wake queue %s at its lapse (%s)", self.queue, exc)
                wake_after_failed_kick(
                    self.kicker, self.queue, after=self.failed_wake, release=release
                )
                return False
            self.kicks += 1
            return True
        kicked = kick_or_wake(
            self.kicker,
            self.queue,
            "rekick",
            safety=self.safety,
            failed_wake=self.failed_wake,
            hop=self.hop,
            release=release,
        )
        self.kicks += int(kicked)
        return kicked
