"""One function's asynchronous event queue, as Lambda's: kept, retried, aged, throttled, cut.

Why faithful, not kind: a stand-in nicer than Lambda lets tests pass where a
user's deploy fails. So, as Lambda's asynchronous queue does:
- every event is kept and run (never merged with another: whatever merging
  pgkick needs is pgkick's own, see pgkick.watch);
- an event that finds every environment busy is throttled and tried again after
  a backoff, 1 s doubling up to 5 minutes, not the moment a slot frees
  (`instant_throttle=True` is the labelled kindness);
- an event older than its maximum age is dropped (the template's
  MaximumEventAgeInSeconds, 1 h), and one that errors, crashes or times out is
  retried after 1 and then 2 minutes, `max_retries` times (MaximumRetryAttempts);
- a chain of invocations that kick each other is cut after 16 (recursive loop
  detection) unless the function allows loops (`RecursiveLoop: Allow`), whether the
  17th is invoked asynchronously or synchronously (RecursiveInvocationException); the
  chain is followed by where an event came from (its lineage), not by what it says;
- with reserved concurrency 0, an event is never run: it goes to the on-failure
  destination at once, without retries ("Capturing records of Lambda asynchronous
  invocations"), and a synchronous invoke is throttled (429);
- an event dropped (retries exhausted, too old, loop cut, cap 0) is handed to
  `on_failure` (the stack sends Lambda's on-failure record to the destination queue);
- on request, faults Lambda documents: an event delivered twice
  (`duplicate_rate`), an event lost silently (`drop_rate`).
Synchronous invokes (RequestResponse) share the environments and the cap; one
that finds no free environment is refused (TooManyRequestsException).
This module is the queue's machinery (the lock, the timers, the environments);
what it holds, its settings with Lambda's defaults, what it counts and the rules
for one event are pgkick_dev.devserver.invocations.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from pgkick_dev.devserver.clock import Cancellable, Clock
from pgkick_dev.devserver.environments import Pool
from pgkick_dev.devserver.invocations import (
    LOOP_LIMIT,
    RETRY_DELAYS,
    THROTTLE_BACKOFF,
    Invocation,
    LoopStopped,
    QueueOptions,
    QueueStats,
    Throttled,
    error_line,
    expired,
    loop_cut,
    next_backoff,
    next_try,
)
from pgkick_dev.devserver.rie_process import Environment, log_text
from pgkick_dev.devserver.timeline import Timeline

__all__ = [
    "LOOP_LIMIT",
    "RETRY_DELAYS",
    "THROTTLE_BACKOFF",
    "AsyncQueue",
    "Invocation",
    "LoopStopped",
    "QueueOptions",
    "QueueStats",
    "Throttled",
]

log = logging.getLogger("pgkick_dev.devserver.queue")


class AsyncQueue:
    """One function: its event queue, its environments (Pool) and what they report."""

    def __init__(
        self,
        function: str,
        pool_factory: Callable[..., Pool],
        *,
        options: QueueOptions,
        clock: Clock,
        timeline: Timeline,
        lock: threading.Condition,
        on_failure: Callable[[Invocation, str], None] | None = None,
    ) -> None:
        """on_failure(item, condition): under the lock, an event Lambda gave up on, for the
        on-failure destination (condition: RetriesExhausted or EventAgeExceeded)."""
        self.function = function
        self._on_failure = on_failure
        self.options = options
        self.stats = QueueStats()
        self._clock = clock
        self._timeline = timeline
        self._lock = lock
        self._random = random.Random(options.seed)
        self._pending: list[Invocation] = []
        self._delayed: dict[int, Cancellable] = {}  # retries and throttle backoffs, armed
        self._keys = itertools.count()
        self._closed = False
        self.pool = pool_factory(lock=lock, on_answer=self._finish, on_exit=self._on_exit)

    # -- accepting ------------------------------------------------------------------
    def submit(
        self,
        event: Any,
        *,
        lineage: int = 0,
        request_id: str | None = None,
        to_destination: bool = True,
    ) -> str:
        """An Event invoke, accepted (the caller answers 202 whatever happens next).
        to_destination=False: an SQS batch the stack hands over (an event source's
        batch never becomes an on-failure record)."""
        item = Invocation(event, lineage, self._clock.now())
        item.to_destination = to_destination
        if request_id:
            item.request_id = request_id
        with self._lock:
            self._record("kick", item)
            if self._closed:
                return item.request_id
            if loop_cut(item, self.options):
                self._drop(item, "recursive loop detected")
                return item.request_id
            if self.pool.concurrency == 0:  # never run, never retried: to the destination
                self.stats.throttles += 1
                self._drop(item, "reserved concurrency 0 (throttled, not retried)")
                return item.request_id
            self.stats.events += 1
            if self.options.drop_rate and self._random.random() < self.options.drop_rate:
                self.stats.injected_drops += 1
                self._record("drop", item, detail="injected: lost silently (--drop-rate)")
                self._lock.notify_all()
                return item.request_id
            self._pending.append(item)
            if self.options.duplicate_rate and self._random.random() < self.options.duplicate_rate:
                self.stats.duplicates += 1
                twin = Invocation(event, lineage, item.born, request_id=item.request_id)
                self._record("duplicate", twin, detail="injected (--duplicate-rate)")
                self._pending.append(twin)
            self._dispatch()
        return item.request_id

    def invoke_sync(
        self, event: Any, *, lineage: int = 0, client_context: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """A RequestResponse invoke: (request id, {"result"|"failure": ...}); raises
        Throttled, or LoopStopped for the 17th invocation of a chain (never run).
        client_context: the Invoke's ClientContext (base64), for the handler's context."""
        request_id, answer = self.start_sync(event, lineage=lineage, client_context=client_context)
        return request_id, answer.result()

    def start_sync(
        self, event: Any, *, lineage: int = 0, client_context: str | None = None
    ) -> tuple[str, concurrent.futures.Future[dict[str, Any]]]:
        """A RequestResponse invoke started: its request id and the future of its answer
        (an event source mapping's caller does not wait on it); raises as invoke_sync."""
        item = Invocation(event, lineage, self._clock.now(), client_context=client_context)
        item.answer = concurrent.futures.Future()
        with self._lock:
            if loop_cut(item, self.options):
                self._record("drop", item, detail="recursive loop detected (RequestResponse: 400)")
                raise LoopStopped(self.function)
            environment = None if self._closed else self.pool.free()
            if environment is None:
                self._record("throttle", item, detail="RequestResponse refused (429)")
                raise Throttled(self.function)
            self._start(environment, item)
        return item.request_id, item.answer

    # -- for the stack, the demo and the tests ----------------------------------------
    def idle(self) -> bool:
        return not self._pending and not self._delayed and not self.pool.busy()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending) + len(self._delayed) + len(self.pool.busy())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for timer in self._delayed.values():
                timer.cancel()
            self._delayed.clear()
            self._pending.clear()
        self.pool.close()

    # -- the queue --------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Under the lock: hand ready events to free environments, up to the cap."""
        now = self._clock.now()
        for item in [i for i in self._pending if expired(i, now, self.options)]:
            self._pending.remove(item)
            self._drop(item, "maximum event age exceeded", condition="EventAgeExceeded")
        for item in [i for i in self._pending if i.ready_at <= now]:
            environment = self.pool.free()
            if environment is None:
                self._throttle([i for i in self._pending if i.ready_at <= now], now)
                break
            self._pending.remove(item)
            self._start(environment, item)
        self.stats.cold_starts, self.stats.timeouts = self.pool.cold_starts, self.pool.timeouts
        self._lock.notify_all()

    def _throttle(self, items: list[Invocation], now: float) -> None:
        """Every environment busy: each ready event waits its backoff (1 s, doubling, 5 min)."""
        for item in items:
            if not item.throttled:
                item.throttled = True
                self.stats.throttles += 1
            if self.options.instant_throttle:
                continue  # kindness: retried by the next _dispatch, when a slot frees
            item.backoff = next_backoff(item, self.options)
            item.ready_at = now + item.backoff
            self._record("throttle", item, detail=f"backoff {item.backoff:g} s")
            self._arm(item.backoff, self._dispatch_later)

    def _start(self, environment: Environment, item: Invocation) -> None:
        self.stats.invocations += 1
        item.started = self._clock.now()
        self._record(
            "invoke_start",
            item,
            detail=f"try {item.tries + 1}",
            environment=environment.id,  # which one ran it: a cold one, or one seen before
            cold=environment.cold,
        )
        self.pool.invoke(environment, item, json.dumps(item.event).encode())

    def _arm(self, delay: float, fire: Callable[[int], None]) -> None:
        key = next(self._keys)
        self._delayed[key] = self._clock.call_later(delay, lambda: fire(key))

    def _dispatch_later(self, key: int) -> None:
        with self._lock:
            self._delayed.pop(key, None)
            if not self._closed:
                self._dispatch()
            self._lock.notify_all()

    def _drop(self, item: Invocation, why: str, condition: str = "RetriesExhausted") -> None:
        """Lambda sends such an event to the on-failure destination, if any (the stack's
        `on_failure`); the list keeps it too, for the tests and the dashboard. AWS
        documents two conditions, RetriesExhausted and EventAgeExceeded: a loop cut and a
        cap of 0 are sent as RetriesExhausted."""
        log.warning("%s: event %s dropped: %s", self.function, item.event, why)
        self.stats.failed_kicks.append({"event": item.event, "why": why, "tries": item.tries})
        self._record("drop", item, detail=why)
        if self._on_failure is not None and item.to_destination and item.answer is None:
            self._on_failure(item, condition)
        self._lock.notify_all()

    def _retry(self, item: Invocation, why: str) -> None:
        """A failed asynchronous invocation runs again after Lambda's delay."""
        if item.answer is not None or self._closed:
            return  # a synchronous caller got its error; nothing is retried for it
        planned = next_try(item, self.options)
        if planned is None:
            self._drop(item, f"retries exhausted ({why})")
            return
        self.stats.retries += 1
        again, delay = planned
        self._record("retry", again, detail=f"in {delay:g} s: {why}")

        def requeue(key: int) -> None:
            with self._lock:
                self._delayed.pop(key, None)
                if not self._closed:
                    self._pending.append(again)
                    self._dispatch()
                self._lock.notify_all()

        self._arm(delay, requeue)

    def _record(self, kind: str, item: Invocation, **fields: Any) -> None:
        event = item.event if isinstance(item.event, dict) else {}
        self._timeline.record(
            kind,
            function=self.function,
            request_id=item.request_id,
            queue=event.get("queue"),
            hop=item.lineage,
            reason=event.get("reason"),  # why it was sent: enqueue, wake, rescue, heal, ...
            **fields,
        )

    # -- what environments answer ----------------------------------------------------
    def _finish(self, environment: Environment, message: dict[str, Any]) -> None:
        """Under the lock: an environment's RIE answered (pgkick_dev.devserver.answers)."""
        result, failure = message["result"], message.get("failure")
        item = environment.busy
        self.stats.results.append(result)
        self.stats.peak_rss_mb = max(self.stats.peak_rss_mb, int(message.get("peak_rss_mb", 0)))
        if message.get("crashed"):
            self.stats.crashes += 1
        failed = failure is not None
        if isinstance(item, Invocation):
            item.failure = failure
            said = error_line(failure)
            detail = f"error: {said}" if failed else "ok"
            self._record("invoke_end", item, duration_ms=message.get("duration_ms"), detail=detail)
            if item.answer is not None:
                log = message.get("log", "")  # for LogType Tail
                item.answer.set_result({"result": result, "failure": failure, "log": log})
            elif failed:
                self.stats.errors += 1  # raised, timed out or crashed: Lambda retries it
                self._retry(item, f"failed: {said}")
        self.pool.finished(environment)
        self._dispatch()

    def _on_exit(self, environment: Environment) -> None:
        """An environment's RIE itself ended (killed, or it never answered); one that was
        running an invocation is retried, as Lambda retries a lost one."""
        item = environment.busy
        if isinstance(item, Invocation):
            self.stats.crashes += 1
            code = environment.process.returncode
            why = environment.exit_reason or f"died (exit {code})"
            duration = round((self._clock.now() - item.started) * 1000, 2)
            self._record("invoke_end", item, duration_ms=duration, detail=why)
            item.failure = {
                "errorType": "Runtime.ExitError",
                "errorMessage": f"RequestId: {item.request_id} Error: "
                f"Runtime exited with error: {why}",
            }
            if item.answer is not None:
                log = log_text(environment)
                item.answer.set_result({"result": None, "failure": item.failure, "log": log})
            self._retry(item, why)
        self._dispatch()
