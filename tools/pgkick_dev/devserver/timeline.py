"""What the local stack did, in order: the record the dashboard reads.

One `Timeline` per dev server. Every part of the stack (the Lambda API, the
event queue, the execution environments, the Scheduler) calls `record(kind,
**fields)`; the dashboard calls `events(since=..., limit=...)`. Thread-safe:
uvicorn's loop, the queue's dispatcher and each environment's reader thread
record concurrently. Bounded: the oldest events go once `capacity` is reached.

Each event is a plain dict with:

- `at`: epoch seconds (float), from the stack's clock (injectable in tests);
- `kind`: one of `KINDS`;
- `function`, `request_id`, `queue`, `hop`, `duration_ms`, `detail` when known
  (absent keys are present with the value None, so readers need no .get()).
Any other keyword given to `record` is kept too (an invocation's `reason`, its
environment and whether it was cold).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

KINDS: Final = frozenset(
    {
        "kick",  # an Event invoke accepted (202), or a local kick handed over
        "invoke_start",  # an environment (its id; cold or not) starts running an event
        "invoke_end",  # ... and finished: duration_ms, detail = "ok" or the error
        "throttle",  # no free environment under the concurrency cap: backing off
        "retry",  # a failed event is queued again (after 1 then 2 minutes)
        "drop",  # an event discarded: max age, retries exhausted, loop, injected drop
        "duplicate",  # an injected second delivery of the same event
        "schedule_create",
        "schedule_fire",
        "schedule_delete",
        "schedule_retry",  # a schedule's delivery refused by its target: retried later
        "schedule_dead_letter",  # ... its RetryPolicy spent: sent to its dead-letter queue
        "schedule_drop",  # ... its RetryPolicy spent and no dead-letter queue: lost
        "freeze",  # an idle environment stopped (SIGSTOP) between invocations
        "thaw",  # ... and continued (SIGCONT) to run the next one
    }
)

FIELDS: Final = ("function", "request_id", "queue", "hop", "duration_ms", "detail")


class Timeline:
    """A thread-safe, bounded, append-only list of what the stack did."""

    def __init__(self, *, capacity: int = 10_000, clock: Callable[[], float] = time.time) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._clock = clock
        self._listeners: list[Callable[[dict[str, Any]], None]] = []

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one event (`kind` must be one of KINDS) and return it."""
        if kind not in KINDS:
            raise ValueError(f"unknown timeline kind {kind!r}: use one of {sorted(KINDS)}")
        event: dict[str, Any] = {"at": float(fields.pop("at", None) or self._clock()), "kind": kind}
        for name in FIELDS:
            event[name] = fields.pop(name, None)
        event.update(fields)
        with self._lock:
            self._events.append(event)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)
        return event

    def events(self, since: float | None = None, limit: int = 500) -> list[dict[str, Any]]:
        """Events with `at` > since (all when None), oldest first, the newest `limit`."""
        with self._lock:
            picked = [dict(e) for e in self._events if since is None or e["at"] > since]
        return picked[-limit:] if limit > 0 else []

    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """Call `listener(event)` after each record (from the recording thread)."""
        with self._lock:
            self._listeners.append(listener)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()
