"""A worker's dead-man's switch: a wake-up at its leases' expiry, removed when it finishes.

Why: a worker that dies holding jobs (killed, timed out, out of memory, frozen)
leaves them `running` until their lease expires, and only a reaper run used to
put them back. The reaper runs seldom, because each run is a connection that
keeps a serverless database awake for a whole suspend window. So each worker
that claims anything books one rescue for the moment its leases would all have
expired; if it returns normally it cancels it. If it died, the rescue fires: a
worker kicked with reason `rescue` re-queues that queue's expired leases and
drains them. Cost: two Scheduler calls (create, delete) per invocation that
claimed something, none per job; a worker that claims nothing books nothing.

The due time: the first job this invocation claims is leased for at least its
remaining time plus a margin, so when that lease expires the invocation has
ended, alive or not. The rescue is booked for that moment. Jobs claimed later,
or leases a heartbeat extended (a kill that came late), may expire after it: a
rescue that finds leases still held in its queue books itself again for the
latest of them (`rescue_queue`). Their holder, if alive, keeps extending them
and is gone by its timeout; then they expire and the next rescue takes them.

The rescue also waits out the dead worker's announcement (PGKICK_WATCH_SECONDS,
pgkick.kick.watch): while it lived, producers saw a worker and did not kick, so jobs
committed then are left to whoever claims next. The rescue, coming after the
announcement lapsed, is that claim: it drains the whole queue, not only what
the dead worker held.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from pgkick.kick.kickers import Kicker, schedule_name, wake_minute
from pgkick.store.expired import ExpiredLeases, ReapedJob

log = logging.getLogger("pgkick.rescue")
MARGIN = timedelta(milliseconds=50)  # past the lease's end (the scheduler adds its minute)


class DeadMansSwitch:
    def __init__(self, kicker: Kicker, queue: str, name: str, *, after: timedelta) -> None:
        """after: from the first claim to the rescue: the lease, plus the announcement's life."""
        self.kicker, self.queue, self.name = kicker, queue, f"pgkick-rescue-{name}"[:64]
        self.after = after
        self.armed = False

    def arm(self) -> None:
        """Book the rescue (once), when the worker first holds jobs: at their lease's end."""
        if self.armed:
            return
        try:
            due = datetime.now(UTC) + self.after + MARGIN
            self.kicker.book_rescue(self.queue, due, self.name)
            self.armed = True
        except Exception as exc:
            log.warning(
                "could not book the rescue of queue %s (%s: %s); a crash would wait for the reaper",
                self.queue,
                type(exc).__name__,
                exc,
            )

    def disarm(self) -> None:
        """The worker finished cleanly: its leases are released, the rescue is not needed."""
        if not self.armed:
            return
        try:
            self.kicker.cancel_rescue(self.name)
            self.armed = False
        except Exception as exc:  # it fires, finds nothing expired, and exits
            log.warning("could not cancel rescue %s (%s: %s)", self.name, type(exc).__name__, exc)


def rescue_queue(store: ExpiredLeases, kicker: Kicker, queue: str) -> list[ReapedJob]:
    """What a `rescue` kick does first: re-queue the queue's expired leases; if leases are
    still held there, come back when the latest expires (its holder may be dead too)."""
    reaped = store.reap_expired(queue)
    latest = store.latest_lease(queue)
    if latest is not None:
        when = latest + MARGIN
        try:
            name = schedule_name(queue, wake_minute(when)).replace("pgkick-", "pgkick-rescue-", 1)
            kicker.book_rescue(queue, when, name)
        except Exception as exc:
            log.warning("could not book the next rescue of %s (%s)", queue, exc)
    return reaped
