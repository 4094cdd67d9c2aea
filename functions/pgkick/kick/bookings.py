"""Wake-ups booked off the commit path: one Scheduler call per queue and minute, at most.

Why a booker of its own: a producer that commits 10,000 delayed jobs over 10,000 distinct
minutes used to make 10,000 CreateSchedule calls one after another after its commit (a
minute or more, holding the caller), and pruned its booked-minutes set on each call
(quadratic). Here `book` only notes the (queue, minute), dropping any already booked or
waiting, and returns at once; one background thread makes the calls, retried when throttled
(pgkick.kick.throttle). The booked minutes expire through a heap, each in O(log n).

A Lambda environment is frozen as soon as its handler returns, and a process may exit: the
worker's runtime calls `flush` before it answers (bounded by its remaining time), and an
exiting process flushes for a few seconds (atexit). What is lost anyway (a crash) is booked
again by the next sweep (pgkick.worker.healing) or by the reaper.
"""

from __future__ import annotations

import atexit
import heapq
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

log = logging.getLogger("pgkick.kick")

EXIT_FLUSH_SECONDS = 5.0


class BookerStats:
    """A booker's counters (a plain class: pgkick.kick.throttle.Backoff says why)."""

    __slots__ = ("calls", "failures", "queued")

    def __init__(self) -> None:
        self.queued = 0  # distinct (queue, minute) handed to the thread
        self.calls = 0  # CreateSchedule calls made (each schedule's, retries not counted)
        self.failures = 0  # bookings given up on (the sweep or the reaper books them again)


class WakeBooker:
    """Background one-time schedule bookings, deduplicated by schedule name."""

    def __init__(self, create: Callable[[str, datetime, str], None]) -> None:
        """create(name, minute, queue): makes the schedule (ConflictException handled there)."""
        self._create = create
        self._pending: dict[str, tuple[datetime, str]] = {}  # name -> (minute, queue), in order
        self._booked: set[str] = set()  # names booked whose minute is still to come
        self._expiry: list[tuple[datetime, str]] = []  # heap of (minute, name) of _booked
        self._busy: set[str] = set()  # names being booked right now
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.stats = BookerStats()

    def book(self, name: str, minute: datetime, queue: str) -> None:
        """Note a wake-up to book; returns at once. Booked or waiting already: nothing."""
        with self._cond:
            self._forget_fired(datetime.now(UTC))
            if name in self._booked or name in self._pending or name in self._busy:
                return
            self._pending[name] = (minute, queue)
            self.stats.queued += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="pgkick-wakes", daemon=True)
                self._thread.start()
                atexit.register(self.flush, EXIT_FLUSH_SECONDS)
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until every wake-up noted is booked or given up."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def pending(self) -> int:
        with self._cond:
            return len(self._pending) + len(self._busy)

    def _forget_fired(self, now: datetime) -> None:
        """Under the lock: booked minutes gone by leave the set (a long-lived app's memory)."""
        while self._expiry and self._expiry[0][0] < now:
            _, name = heapq.heappop(self._expiry)
            self._booked.discard(name)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                name = next(iter(self._pending))
                minute, queue = self._pending.pop(name)
                self._busy.add(name)
            ok = False
            try:
                self._create(name, minute, queue)
                ok = True
            except Exception as exc:
                # (imported on this error path only: the worker's cold start does without)
                from pgkick.awsapi.signature import without_session_token

                log.warning(
                    "no wake-up for queue %s at %s (%s: %s); the next sweep or the reaper books it",
                    queue,
                    minute.isoformat(),
                    type(exc).__name__,
                    " ".join(without_session_token(str(exc)).split())[:300],
                )
            with self._cond:
                self._busy.discard(name)
                self.stats.calls += 1
                if ok:
                    self._booked.add(name)
                    heapq.heappush(self._expiry, (minute, name))
                else:
                    self.stats.failures += 1
                self._cond.notify_all()
