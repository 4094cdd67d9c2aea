"""Kick only when no worker will see the job: the protocol between producers and workers.

Why: Lambda's asynchronous queue keeps every event and runs each one, so a
kick per enqueue costs an invocation and a database session per job. Producers
are many processes, so whether a worker is already on a queue must be known
through the database, not in memory. The table `queue_watchers` holds, per
queue, who will look at it soon:

- a worker draining the queue (`watcher` = its id), announced with its first
  claim and renewed with later claims, `until` a few seconds ahead
  (PGKICK_WATCH_SECONDS): the latest moment it promises to claim again;
- a kick on its way (`watcher` = 'kick'), written by the producer that sends
  it, `until` PGKICK_KICK_PENDING_MS ahead; the worker it starts takes it up
  (deletes it) in the same statement that announces itself.

The producer, after its commit, reserves the kick (`queue_kick_reserve`): one
statement that returns the queue only if nobody watches it, and then marks the
pending kick, so of many racing producers exactly one kicks. For
`enqueue_and_kick` it rides in the same round trip as the insert, after an
explicit COMMIT in the pipeline.

A worker whose claim comes back empty lingers (PGKICK_WORKER_LINGER_MS,
re-claiming at growing intervals, still announced), then withdraws, commits,
and claims once more (`withdraw_and_claim`, one round trip) before it exits.

Why a one-off kick does not linger: a worker whose first claim got exactly one job
(the one its kick was sent for) and whose next claim found nothing has seen no flow
on that queue: lingering there would only hold the invocation. With many queues of
one job each (per-tenant queues: 2,000 of them on 4 execution environments) every
invocation lingered its whole window on its own empty queue, and 692 jobs were done
after 180 s where linger off did all 2,000 in 26 s. A trickle shows itself: its
first invocation starts after a cold start, by which time more jobs have come (the
producers saw the pending kick and did not kick again), so its first claim gets
more than one, or a later claim finds one; that worker lingers as before. What the
first invocation cannot see, a slower trickle (a job per second, say), the runtime
remembers per execution environment: a queue that had a one-off kick in the last
minute (`pgkick.worker.runtime.RecentQueues`) is lingered on at its next kick.
A timer's invocation that finds nothing does not linger either: every kick is followed by
its safety wake-up a minute later (pgkick.kick.safety), which usually finds the queue
served; lingering there billed the whole window (1.5 s for nothing, at the default) for
each kick, beside the queue's own lingering worker if it had a flow.
Leaving early is always safe: lingering is an optimisation, the exit below is the
protocol.

Why no wake-up is lost. Take a job J committed at time c, by a producer whose
reservation statement runs after c (its snapshot S is taken after c).
- If S sees nobody watching, the producer kicks (or, if the kick fails,
  releases the reservation and books a wake-up).
- If S sees a worker W, W's withdrawal committed after S. W's last act is a
  claim whose snapshot is taken after that withdrawal committed, hence after S
  and after c: it sees J (unless J is locked by another worker, who has it, or
  the claim came back full, in which case W re-announces and goes on). A W out
  of time withdraws, then asks whether a job is ready and hands over if so:
  the same order, the same argument.
- If S sees a pending kick K, the worker K starts deletes K when it announces,
  after S; from then on it is the worker of the case above.
- A worker that crashes (or whose invocation fails with an error) leaves its
  row until `until` (seconds); jobs committed meanwhile get no kick. After
  `until` the next producer kicks again, and for the jobs committed before: a
  worker that had
  claimed anything booked a rescue (pgkick.worker.rescue) that fires after its lease
  and its announcement have both lapsed, and drains the queue; one that had
  claimed nothing is retried by Lambda (after about a minute, past `until`),
  and the retry drains the queue.
- A pending kick that never becomes a worker (dropped by Lambda after its
  maximum age, or cut by loop detection) expires after its window; jobs
  committed meanwhile are run by the kick's safety wake-up a minute later
  (pgkick.kick.safety), the next producer's kick, a wake-up, or the next worker
  to leave any queue (pgkick.worker.healing kicks a ready queue nobody watches,
  and books that kick's safety). Only if the safety is lost too and no traffic
  follows is the reaper left.
Jobs not ready yet (`run_at` in the future) never rely on this: each books a
wake-up at its `run_at`. Except for the minute's wait: one due within the server-clock
allowance is kicked as if due (pgkick.kick.kickers.due_by), and when W's announcement
took that kick's place, W's last claim may come before it is due; W's exit sweep then
sees it queued, due within moments, and W stays for it (pgkick.worker.healing.stay_for).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta

from pgkick.store.worker import Announcement

FIRST_PAUSE = 0.005  # seconds; a lingering worker's pauses double up to MAX_PAUSE
MAX_PAUSE = 0.1


class WorkerWatch:
    """One worker's announcement on one queue: when to renew it, and its lingering (a plain
    class: pgkick.kick.throttle.Backoff says why)."""

    __slots__ = (
        "_idle_since",
        "_pause",
        "_renewed_at",
        "clock",
        "linger",
        "promise",
        "ttl",
        "watcher",
    )

    def __init__(
        self,
        ttl: timedelta,
        linger: timedelta,
        clock: Callable[[], float] = time.monotonic,
        watcher: str | None = None,
    ) -> None:
        self.ttl, self.linger, self.clock = ttl, linger, clock
        # 64 random bits (uuid4().hex[:16] had 60), without importing uuid at every cold start
        self.watcher = watcher or f"worker-{os.urandom(8).hex()}"
        self._renewed_at: float | None = None
        # When the announcement in force lapses, on `clock` (None: none in force); read by
        # the heartbeat's thread (pgkick.worker.lapse), written only by the loop's.
        self.promise: float | None = None
        self._idle_since: float | None = None
        self._pause = FIRST_PAUSE

    def announcement(self) -> Announcement | None:
        """The announcement to send with the next claim, or None while a recent one holds.

        Renewed once a third of its lifetime has passed, so it never lapses between
        two claims of a busy worker; a batch that runs longer lets it lapse, and
        producers then kick another worker (the backlog gets more hands). A job
        committed before the lapse got no kick: the worker's heartbeat kicks for it at
        the lapse (pgkick.worker.lapse; `announced` sets the promise it watches)."""
        now = self.clock()
        if self._renewed_at is not None and now - self._renewed_at < self.ttl.total_seconds() / 3:
            return None
        self._renewed_at = now
        return Announcement(self.watcher, self.ttl)

    def announced(self) -> None:
        """The claim that carried the announcement has returned: it is committed, and lapses
        `ttl` from now at the latest. Measured after the round trip, not before it, so the
        promise is never earlier than the row's `until` (the server's now() at the claim,
        plus the ttl): a ready check made at the promise sees the row lapsed too."""
        self.promise = self.clock() + self.ttl.total_seconds()

    def withdrawn(self) -> None:
        """The row is gone: the next claim must announce again (no promise in force)."""
        self._renewed_at = self.promise = None

    def busy(self) -> None:
        """A claim found work: lingering starts over at the shortest pause."""
        self._idle_since, self._pause = None, FIRST_PAUSE

    def skip_linger(self) -> None:
        """Leave at once this time: no window to spend on this queue."""
        self._idle_since = self.clock() - self.linger.total_seconds()

    def next_pause(self) -> float | None:
        """Seconds to wait before re-claiming an empty queue; None once the window is spent."""
        now = self.clock()
        if self._idle_since is None:
            self._idle_since = now
        left = self._idle_since + self.linger.total_seconds() - now
        if left <= 0:
            return None
        pause = min(self._pause, left)
        self._pause = min(self._pause * 2, MAX_PAUSE)
        return pause


def claims_while_lingering(linger: timedelta) -> int:
    """The most claims a worker makes while it lingers on an empty queue (and so the most
    an idle window costs the database): pauses of 5, 10, 20, 40, 80, then 100 ms."""
    left, pause, claims = linger.total_seconds(), FIRST_PAUSE, 0
    while left > 0:
        claims += 1
        left -= pause
        pause = min(pause * 2, MAX_PAUSE)
    return claims
