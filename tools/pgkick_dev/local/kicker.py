"""The local kicker: Lambda's asynchronous invoke, stood in for development, the demo and tests.

Why it must be faithful, not kind: a stand-in nicer than Lambda lets our tests
pass where a user's deploy fails. So, as Lambda's asynchronous queue does:
- every event is kept and run once (never merged with another: whatever
  merging pgkick needs is pgkick's own, see pgkick.kick.watch);
- an event that finds every execution environment busy waits (a throttle,
  counted), and is dropped once older than its maximum age;
- an invocation that errors, crashes or times out is retried twice, after
  Lambda's delays (about 1 and 2 minutes, scaled down by tests);
- a chain of invocations that kick each other is cut after 16 (recursive loop
  detection): the 17th event is dropped to `failed_kicks`, unless the function
  is configured to allow loops (`RecursiveLoop: Allow`). The chain is followed
  as AWS follows it, by where an event came from, not by what it says: a kick
  sent from inside an invocation is one hop further than that invocation; a
  kick from the app or a wake-up timer starts a new chain.

It also stands in for EventBridge Scheduler's recurring schedules: given the
`@pgkick.periodic` declarations, a timer per declaration sends each tick's event
into the same asynchronous queue, twice by default (pgkick_dev.local.ticks).

Execution environments are processes (pgkick_dev.local.pool). A worker's own kicks
and wake-ups come back over a pipe, so the cap, the queue and the timers live
in one place.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgkick.kick.kickers import kick_event
from pgkick.tasks.recurring import Periodic
from pgkick_dev.local.pool import Environment, Pool
from pgkick_dev.local.ticks import PeriodicTimers, StartTimer, thread_timer

log = logging.getLogger("pgkick_dev.local.kicker")

RETRY_DELAYS = (60.0, 120.0)  # Lambda retries a failed asynchronous invocation twice
MAX_EVENT_AGE = 6 * 3600.0  # Lambda's default maximum event age, seconds
LOOP_LIMIT = 16  # invocations of one chain before Lambda stops the next one


@dataclass
class _Event:
    event: dict[str, Any]
    lineage: int  # invocations of this chain before this one (AWS's count, not the payload's)
    born: float  # monotonic seconds: the maximum age counts from here
    tries: int = 0
    throttled: bool = False


@dataclass
class LocalStats:
    events: int = 0  # accepted by the async queue (kicks, wake-ups, retries not counted)
    invocations: int = 0
    cold_starts: int = 0
    throttles: int = 0  # events that had to wait for a free environment
    retries: int = 0
    crashes: int = 0
    errors: int = 0
    timeouts: int = 0
    db_sessions: int = 0  # database connections the invocations opened
    failed_kicks: list[dict[str, Any]] = field(default_factory=list)  # dropped, with why
    results: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_mb: int = 0  # the largest "Max Memory Used" of any environment so far


class LocalKicker:
    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        concurrency: int = 4,
        timeout_ms: int = 60_000,
        idle_seconds: float = 5.0,
        retry_delays: tuple[float, float] = RETRY_DELAYS,
        max_event_age: float = MAX_EVENT_AGE,
        allow_loops: bool = False,
        output: Path | None = None,
        periodic: Iterable[Periodic] = (),
        tick_deliveries: int = 2,
        tick_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        tick_timer: StartTimer = thread_timer,
    ) -> None:
        """output: a file for the workers' logs and metrics (default: this process's stdout).
        allow_loops: as `RecursiveLoop: Allow` on the function (the default terminates).
        periodic: declarations whose ticks to fire, each delivered `tick_deliveries` times
        (tick_clock and tick_timer: for tests, a clock and timers they move by hand)."""
        if concurrency < 1:
            raise ValueError(f"concurrency: {concurrency} must be at least 1")
        self.retry_delays = retry_delays
        self.max_event_age = max_event_age
        self.allow_loops = allow_loops
        self.stats = LocalStats()
        self._lock = threading.Condition()
        self._pending: list[_Event] = []
        self._delayed: set[threading.Timer] = set()  # retries waiting for their delay
        self._pool = Pool(
            env={**os.environ, **(env or {})},
            output=output,
            concurrency=concurrency,
            timeout_ms=timeout_ms,
            idle_seconds=idle_seconds,
            lock=self._lock,
            on_message=self._on_message,
            on_exit=self._on_exit,
        )
        self._timers: dict[tuple[str, int], threading.Timer] = {}
        self._rescues: dict[str, threading.Timer] = {}  # dead-man's switches, by name
        self._closed = False
        self._ticks = PeriodicTimers(
            periodic,
            self._fire_tick,
            now=tick_clock,
            start_timer=tick_timer,
            deliveries=tick_deliveries,
        )

    @property
    def output(self) -> Path | None:
        """Where the environments' stdout and stderr go (None: this process's)."""
        return self._pool.output

    @output.setter
    def output(self, path: Path | None) -> None:
        self._pool.output = path

    # -- the Kicker protocol ------------------------------------------------------
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        """An asynchronous invoke from outside any invocation: a new chain."""
        self._accept(_Event(kick_event(queue, reason, hop), lineage=0, born=time.monotonic()))

    def wake_at(self, queue: str, when: datetime) -> None:
        due = math.ceil(when.timestamp() * 100)  # hundredths of a second, never early
        with self._lock:  # a wake-up of the queue due up to 0.1 s later covers this one
            covered = any(q == queue and due <= d <= due + 10 for q, d in self._timers)
            if self._closed or covered:
                return
            delay = max(0.0, due / 100 - datetime.now(UTC).timestamp())
            timer = threading.Timer(delay, self._fire_wake, (queue, due))
            timer.daemon = True
            self._timers[(queue, due)] = timer
        timer.start()

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        """A timer that kicks `queue` with reason `rescue` at `when`, as a schedule would."""
        with self._lock:
            if self._closed or name in self._rescues:
                return
            delay = max(0.0, when.timestamp() - datetime.now(UTC).timestamp())
            timer = threading.Timer(delay, self._fire_rescue, (queue, name))
            timer.daemon = True
            self._rescues[name] = timer
        timer.start()

    def cancel_rescue(self, name: str) -> None:
        with self._lock:
            timer = self._rescues.pop(name, None)
            self._lock.notify_all()
        if timer is not None:
            timer.cancel()

    def ticks(self) -> dict[str, datetime]:
        """Each periodic declaration's next tick, as its timer sleeps until it."""
        return self._ticks.due()

    def rescues(self) -> list[str]:
        """The names of the rescues booked and neither fired nor cancelled."""
        with self._lock:
            return sorted(self._rescues)

    # -- for the demo, the bench and the tests ------------------------------------
    def wait_idle(self, timeout: float, *, include_wakes: bool = False) -> bool:
        """Block until nothing runs or waits (and, if asked, no wake-up is booked; the
        periodic timers never count: they are armed for as long as the kicker lives)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: (
                    not self._pending
                    and not self._delayed
                    and not self._pool.busy()
                    and (not include_wakes or not (self._timers or self._rescues))
                ),
                timeout,
            )

    def processes(self) -> list[int]:
        """The pids of the environments running an invocation now."""
        with self._lock:
            return [e.process.pid for e in self._pool.busy()]

    def close(self) -> None:
        """Cancel ticks, wake-ups and retries, and let every environment exit (stdin closed)."""
        self._ticks.close()  # not under our lock: a firing tick holds its own, then takes ours
        with self._lock:
            self._closed = True
            for timer in [*self._timers.values(), *self._delayed, *self._rescues.values()]:
                timer.cancel()
            self._timers.clear()
            self._rescues.clear()
            self._delayed.clear()
        self._pool.close()

    # -- the asynchronous queue ---------------------------------------------------
    def _accept(self, item: _Event) -> None:
        with self._lock:
            if self._closed:
                return
            if item.lineage >= LOOP_LIMIT and not self.allow_loops:
                self._drop(item, "recursive loop detected")
                return
            self.stats.events += 1
            self._pending.append(item)
            self._dispatch()

    def _dispatch(self) -> None:
        """Hand waiting events to idle environments, starting new ones up to the cap."""
        now = time.monotonic()
        for item in [i for i in self._pending if now - i.born > self.max_event_age]:
            self._pending.remove(item)
            self._drop(item, "maximum event age exceeded")
        while self._pending:
            environment = self._pool.free()
            if environment is None:  # every environment busy: the rest wait (throttled)
                for item in self._pending:
                    if not item.throttled:
                        item.throttled = True
                        self.stats.throttles += 1
                break
            item = self._pending.pop(0)
            self.stats.invocations += 1
            self._pool.invoke(environment, item, item.event)
        self.stats.cold_starts, self.stats.timeouts = self._pool.cold_starts, self._pool.timeouts

    def _drop(self, item: _Event, why: str) -> None:
        """Lambda sends such an event to the on-failure destination; we keep it in a list."""
        log.warning("local kick %s dropped: %s", item.event, why)
        self.stats.failed_kicks.append({"event": item.event, "why": why, "tries": item.tries})
        self._lock.notify_all()

    def _retry(self, item: _Event, why: str) -> None:
        """A failed invocation runs again after Lambda's delay, at most twice."""
        log.warning("local invocation %s %s", item.event, why)
        if self._closed:
            return
        if item.tries >= len(self.retry_delays):
            self._drop(item, f"retries exhausted ({why})")
            return
        self.stats.retries += 1
        again = _Event(item.event, item.lineage, item.born, item.tries + 1)
        timer = threading.Timer(self.retry_delays[item.tries], lambda: self._requeue(again, timer))
        timer.daemon = True
        self._delayed.add(timer)
        timer.start()

    def _requeue(self, item: _Event, timer: threading.Timer) -> None:
        with self._lock:
            self._delayed.discard(timer)
            if not self._closed:
                self._pending.append(item)
                self._dispatch()
            self._lock.notify_all()

    def _fire_rescue(self, queue: str, name: str) -> None:
        with self._lock:
            if self._rescues.pop(name, None) is not None:
                self._accept(_Event(kick_event(queue, "rescue"), 0, time.monotonic()))

    def _fire_tick(self, event: dict[str, Any]) -> None:
        """A schedule's invocation, as the scheduler sends it: a new chain."""
        self._accept(_Event(event, 0, time.monotonic()))

    def _fire_wake(self, queue: str, due: int) -> None:
        with self._lock:  # one step, so wait_idle never sees the wake gone but not yet kicked
            self._timers.pop((queue, due), None)
            self.kick(queue, "wake")

    # -- what environments say ------------------------------------------------------
    def _on_message(self, environment: Environment, message: dict[str, Any]) -> None:
        with self._lock:
            if "kick" in message:  # one hop further down the sender's chain
                sender = environment.busy
                lineage = sender.lineage + 1 if isinstance(sender, _Event) else 0
                self._accept(_Event(message["kick"], lineage, time.monotonic()))
            elif "wake" in message:
                self.wake_at(
                    message["wake"]["queue"], datetime.fromisoformat(message["wake"]["at"])
                )
            elif "rescue" in message:
                rescue = message["rescue"]
                when = datetime.fromisoformat(rescue["at"])
                self.book_rescue(rescue["queue"], when, rescue["name"])
            elif "cancel_rescue" in message:
                self.cancel_rescue(message["cancel_rescue"])
            elif "started" in message:
                self._pool.arm_deadline(environment)
            elif "result" in message:
                self._finish(environment, message)

    def _finish(self, environment: Environment, message: dict[str, Any]) -> None:
        result = message["result"]
        self.stats.results.append(result)
        self.stats.db_sessions += int(message.get("db_sessions", 0))
        self.stats.peak_rss_mb = max(self.stats.peak_rss_mb, int(message.get("peak_rss_mb", 0)))
        if isinstance(result, dict) and "error" in result and environment.busy:
            self.stats.errors += 1  # the handler raised: Lambda retries that too
            self._retry(environment.busy, f"failed: {result['error']}")
        self._pool.finished(environment)
        self._dispatch()
        self._lock.notify_all()

    def _on_exit(self, environment: Environment) -> None:
        """An environment ended; one that died mid-invocation is retried, as Lambda does."""
        if environment.busy is not None:  # killed, or timed out
            self.stats.crashes += 1
            self._retry(environment.busy, f"died (exit {environment.process.returncode})")
        self._dispatch()
        self._lock.notify_all()
