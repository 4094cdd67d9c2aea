"""Time for the local stack: when things are due, and how to wait for them without polling.

Why injectable: the stand-in waits minutes on purpose (retries after 1 and 2
minutes, throttle backoff up to 5 minutes, Scheduler at the minute). Tests move a
`ManualClock` instead of sleeping; the stack runs on the `RealClock`.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds."""

    def call_later(self, delay: float, fire: Callable[[], None]) -> Cancellable:
        """Call `fire()` once, `delay` seconds from now (on some other thread)."""


class RealClock:
    def now(self) -> float:
        return time.time()

    def call_later(self, delay: float, fire: Callable[[], None]) -> Cancellable:
        timer = threading.Timer(max(0.0, delay), fire)
        timer.daemon = True
        timer.start()
        return timer


class _Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock the test moves: `advance(seconds)` fires, in order, what falls due."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._due: list[tuple[float, int, _Handle, Callable[[], None]]] = []
        self._order = itertools.count()
        self._lock = threading.RLock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def call_later(self, delay: float, fire: Callable[[], None]) -> Cancellable:
        handle = _Handle()
        with self._lock:
            due = self._now + max(0.0, delay)
            heapq.heappush(self._due, (due, next(self._order), handle, fire))
        return handle

    def pending(self) -> list[float]:
        """When each live timer is due, soonest first."""
        with self._lock:
            return sorted(at for at, _, h, _ in self._due if not h.cancelled)

    def advance(self, seconds: float) -> None:
        """Move time forward, firing each timer at its own due time on the way."""
        with self._lock:
            end = self._now + seconds
        while True:
            with self._lock:
                while self._due and self._due[0][2].cancelled:
                    heapq.heappop(self._due)
                if not self._due or self._due[0][0] > end:
                    self._now = end
                    return
                at, _, _, fire = heapq.heappop(self._due)
                self._now = max(self._now, at)
            fire()  # outside our lock: it may take the stack's and book more timers
