"""EventBridge Scheduler's recurring schedules, stood in locally: one timer per declaration.

Why timers and not a loop: nothing polls, locally either. Each `@pgkick.periodic`
declaration has one timer sleeping until its next tick (pgkick_dev.local.cron);
when it fires, the tick event goes out exactly as the scheduler fills in the
schedule's Input (`<aws.scheduler.scheduled-time>` replaced by the tick's time),
and the timer is armed for the tick after.

Unkind on purpose, as the scheduler may be: delivery is at least once, so by
default each tick is delivered twice (`deliveries=2`), two events that race in
two environments; the worker's per-tick key must make them one job. What differs,
and is not stood in: the scheduler invokes within the minute of a tick (60 s
precision) and retries a failed delivery for up to a day; a local timer fires on
the dot, and a timer that wakes late (a laptop asleep) delivers its one tick late
and skips to the next one after now, where the scheduler would deliver each.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from pgkick.tasks.recurring import SCHEDULED_TIME, Periodic
from pgkick_dev.local.cron import next_tick


class Cancellable(Protocol):
    def cancel(self) -> None: ...


StartTimer = Callable[[float, Callable[[], None]], Cancellable]


def thread_timer(delay: float, fire: Callable[[], None]) -> Cancellable:
    """A daemon threading.Timer, started: the default way to sleep until a tick."""
    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()
    return timer


def tick_event(periodic: Periodic, tick: datetime) -> dict[str, Any]:
    """The schedule's Input with the scheduler's placeholder filled in, as it sends it."""
    scheduled = tick.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event: dict[str, Any] = json.loads(
        json.dumps(periodic.event()).replace(SCHEDULED_TIME, scheduled)
    )
    return event


class PeriodicTimers:
    """The declarations' timers; `deliver` sends one tick event (the kicker's async queue)."""

    def __init__(
        self,
        declarations: Iterable[Periodic],
        deliver: Callable[[dict[str, Any]], None],
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        start_timer: StartTimer = thread_timer,
        deliveries: int = 2,
    ) -> None:
        if deliveries < 1:
            raise ValueError(f"deliveries: {deliveries} must be at least 1")
        self._declared = {p.name: p for p in declarations}
        self._deliver, self._now, self._start = deliver, now, start_timer
        self._deliveries = deliveries
        self._lock = threading.Lock()
        self._armed: dict[str, tuple[datetime, Cancellable]] = {}
        self._closed = False
        with self._lock:
            started = self._now()
            for periodic in self._declared.values():
                self._arm(periodic, next_tick(periodic.expression, periodic.timezone, started))

    def due(self) -> dict[str, datetime]:
        """Each declaration's next tick (a declaration with none left is absent)."""
        with self._lock:
            return {name: when for name, (when, _) in self._armed.items()}

    def close(self) -> None:
        """Cancel every timer; a timer already firing delivers nothing and arms nothing."""
        with self._lock:
            self._closed = True
            armed, self._armed = list(self._armed.values()), {}
        for _, timer in armed:
            timer.cancel()

    def _arm(self, periodic: Periodic, when: datetime | None) -> None:
        """Under the lock: sleep until `when`, the declaration's next tick."""
        if when is None or self._closed:
            self._armed.pop(periodic.name, None)
            return
        delay = max(0.0, (when - self._now()).total_seconds())
        timer = self._start(delay, lambda: self._fire(periodic.name, when))
        self._armed[periodic.name] = (when, timer)

    def _fire(self, name: str, when: datetime) -> None:
        with self._lock:
            armed = self._armed.get(name)
            if self._closed or armed is None or armed[0] != when:
                return  # closed, or a stale timer
            periodic, now = self._declared[name], self._now()
            if now < when:  # woke early (the wall clock moved): sleep the rest
                self._arm(periodic, when)
                return
            after = max(when, now)  # late past later ticks: deliver this one, skip to the next
            self._arm(periodic, next_tick(periodic.expression, periodic.timezone, after))
        event = tick_event(periodic, when)  # outside the lock: delivering takes the kicker's
        for _ in range(self._deliveries):
            self._deliver(dict(event))
