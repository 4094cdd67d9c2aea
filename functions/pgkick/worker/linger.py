"""How a lingering worker waits between two claims of an empty queue: on its socket, for a
producer's NOTIFY, rather than asleep.

Why: a worker lingers on a queue it just drained (pgkick.kick.watch), re-claiming after
pauses of 5, 10, 20, 40, 80, then 100 ms; a job committed during a pause waited for the
pause to end (commit-to-claim p50 ~20 ms in a trickle). It holds its session while it
lingers anyway, so it LISTENs on its queue's channel and names that channel on its
announcement (`queue_watcher_listen`, until the end of its linger window). A producer's
kick reservation already reads the queue's watchers to decide whether to kick; the same
statement NOTIFYs each watcher whose channel is named and whose window has not ended,
delivered at that statement's commit. The worker's wait ends at the notification, and
it claims at once.

What this does not change:
- The pauses stay, as the wait's timeout: a notification that never comes (lost, or a
  producer that reserved before the channel was named) leaves the job to the next pause,
  exactly as before. Notifications only shorten waits.
- Nothing while the queue is idle: a worker listens only inside its linger window and
  UNLISTENs in the round trip of its withdrawal (an invocation's connection is closed
  anyway when it ends); a producer NOTIFYs only a worker whose window is open, so no
  NOTIFY while no worker lingers. A worker that went back to work stays named until its
  window ends (at most PGKICK_WORKER_LINGER_MS): producers may notify it meanwhile, and
  the notification only ends its next wait early.
- Behind a transaction-mode pooler LISTEN cannot work (the next transaction may run on
  another server session): PGKICK_WORKER_LISTEN=auto checks once per drain that the
  session is the server's own (pgkick.store.listen) and, if not, waits with the pauses
  only, as before this module. `on` skips the check (a session-mode pooler), `off`
  never listens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from pgkick.kick.watch import MAX_PAUSE, WorkerWatch
from pgkick.store.listen import queue_channel
from pgkick.store.worker import WorkerStore

log = logging.getLogger("pgkick.worker")


class WakeUpLine:
    """One drain's waits while it lingers on `queue` (as `watch`'s worker): on the
    notification line when it can, else asleep (`sleep`). Counts how each wait ended
    (`woken`, `timed_out`, `slept`)."""

    def __init__(
        self,
        store: WorkerStore,
        queue: str,
        watch: WorkerWatch,
        *,
        mode: str,
        sleep: Callable[[float], None],
    ) -> None:
        self.store = store
        self.queue = queue
        self.watcher = watch.watcher
        self.channel = queue_channel(store.schema, queue)
        # Named for the linger window and one longest pause: a wait never outlasts the name
        # (see _listening), and one naming covers a whole window of pauses.
        self.window = watch.linger + timedelta(seconds=MAX_PAUSE)
        self.sleep = sleep
        self.clock = watch.clock
        # None: not checked yet (auto); False: pauses only.
        self.direct: bool | None = {"on": True, "off": False}.get(mode)
        self.subscribed = False
        self._named_until: float | None = None  # on this drain's clock, a lower bound
        self.woken = self.timed_out = self.slept = 0

    def wait(self, pause: float) -> None:
        """Wait `pause` seconds, or less if a producer notifies this queue's channel."""
        if not self._listening(pause):
            self.slept += 1
            self.sleep(pause)
        elif self.store.await_notification(pause):
            self.woken += 1
        else:
            self.timed_out += 1

    def withdrawing(self) -> str | None:
        """The channel to UNLISTEN in the withdrawal's round trip (None: not subscribed).
        The announcement goes with the withdrawal: a later one must name the channel again."""
        channel = self.channel if self.subscribed else None
        self.subscribed, self._named_until = False, None
        return channel

    def close(self) -> None:
        """UNLISTEN if still subscribed (a drain that ended without withdrawing through
        `withdrawing`); never raises: the connection is closed with the invocation anyway."""
        if not self.subscribed:
            return
        self.subscribed = False
        try:
            self.store.unlisten(self.channel)
        except Exception:
            log.warning("could not UNLISTEN %s; the session ends with the invocation", self.channel)

    def _listening(self, pause: float) -> bool:
        """Subscribed, with the channel named on the announcement for at least `pause` more
        seconds: a round trip at the start of a window (and when the name would run out
        during the wait), none per pause.

        Why before it runs out: the name's end is the server's (now() of the naming, plus
        the window), this drain's estimate of it a little earlier (taken before the round
        trip). A wait that went past it would be blind: producers stop notifying at the
        server's end, and a job committed then would wait for the pause (bench: p99 50 ms,
        the trickle's jobs committed in the last pause of each window)."""
        if self.direct is None:
            self.direct = self.store.direct_session()
            if not self.direct:
                log.info("a pooler stands before the server: lingering on pauses only")
        if not self.direct:
            return False
        now = self.clock()
        if self._named_until is None or now + pause > self._named_until:
            self.store.listen(
                self.channel, self.queue, self.watcher, self.window, subscribe=not self.subscribed
            )
            self.subscribed = True
            self._named_until = now + self.window.total_seconds()
        return True
