"""What Lambda's asynchronous queue holds, how it is set up and what it counts, stood in.

Why apart from the queue's machinery (pgkick_dev.devserver.queue: locks, timers,
environments): these are the values a reader of the stand-in checks against AWS's
documentation, and what the stack's callers (the local kicker, the bench, the demo, the
tests) import without the machinery. The settings are Lambda's, with its defaults (Lambda
Developer Guide, "Asynchronous invocation" and "Recursive loop detection"):
- a failed asynchronous invocation (an error, a crash, a timeout) is retried after one
  minute, then after two more, up to MaximumRetryAttempts (0-2, default 2);
- an event older than MaximumEventAgeInSeconds is dropped; pgkick's template sets 1 h;
- an event throttled for want of a free environment goes back to the queue and is tried
  again after an interval that starts at 1 s and grows exponentially to 5 minutes;
- a chain of invocations that invoke each other is stopped after 16 (recursive loop
  detection) unless the function's RecursiveLoop is Allow;
- on request, faults Lambda documents (delivery is at least once): an event delivered
  twice (`duplicate_rate`), an event lost silently (`drop_rate`).
`instant_throttle` is the labelled kindness, nothing Lambda does. An invocation's chain
position (`lineage`) is where the event came from, counted by the stack, never what the
event says. Synchronous invokes (RequestResponse) carry a future for their caller's
answer; one that finds every environment busy is refused (Throttled, Lambda's 429).
"""

from __future__ import annotations

import concurrent.futures
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

RETRY_DELAYS = (60.0, 120.0)  # Lambda retries a failed asynchronous invocation after these
THROTTLE_BACKOFF = (1.0, 300.0)  # Lambda's throttle backoff: from 1 s, doubling, to 5 minutes
LOOP_LIMIT = 16  # invocations of one chain before Lambda stops the next one


class Throttled(Exception):
    """A synchronous invoke found every environment busy (Lambda answers 429)."""


class LoopStopped(Exception):
    """A synchronous invoke is the 17th of its chain (Lambda answers 400
    RecursiveInvocationException and does not run it)."""


@dataclass
class Invocation:
    event: Any
    lineage: int  # invocations of this chain before this one (AWS's count, not the payload's)
    born: float  # epoch seconds: the maximum age counts from here
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    tries: int = 0
    throttled: bool = False
    backoff: float = 0.0  # the last throttle backoff, seconds
    ready_at: float = 0.0  # not dispatched before this (a throttle's backoff)
    started: float = 0.0
    answer: concurrent.futures.Future[dict[str, Any]] | None = None  # RequestResponse only
    failure: Any = None  # the last try's error ({"errorType", "errorMessage", ...})
    to_destination: bool = True  # False: an SQS batch handed over, never an on-failure record
    client_context: str | None = None  # the Invoke's ClientContext (base64), RequestResponse only


@dataclass
class QueueStats:
    events: int = 0  # accepted by the async queue (retries and duplicates not counted)
    invocations: int = 0
    cold_starts: int = 0
    throttles: int = 0  # events that had to wait for a free environment
    retries: int = 0
    crashes: int = 0
    errors: int = 0
    timeouts: int = 0
    duplicates: int = 0  # injected second deliveries
    injected_drops: int = 0  # events lost on purpose (silent, as on AWS: no destination)
    failed_kicks: list[dict[str, Any]] = field(default_factory=list)  # dropped, with why
    results: list[Any] = field(default_factory=list)  # each answer ({"error": ...} if failed)
    peak_rss_mb: int = 0  # the largest "Max Memory Used" of any environment so far


@dataclass
class QueueOptions:
    retry_delays: tuple[float, ...] = RETRY_DELAYS
    max_retries: int = 2  # MaximumRetryAttempts
    max_event_age: float = 3600.0  # MaximumEventAgeInSeconds (pgkick's template)
    allow_loops: bool = False  # RecursiveLoop: Allow
    throttle_backoff: tuple[float, float] = THROTTLE_BACKOFF
    instant_throttle: bool = False  # kindness: a throttled event runs when a slot frees
    duplicate_rate: float = 0.0
    drop_rate: float = 0.0
    seed: int | None = None


def error_line(error: Any) -> str:
    """An invocation's error in one line: Lambda's error payload as "errorType: errorMessage"."""
    if isinstance(error, dict):
        return f"{error.get('errorType')}: {error.get('errorMessage')}"
    return str(error)


# -- Lambda's rules for one event (the queue applies them under its lock) ---------------
def expired(item: Invocation, now: float, options: QueueOptions) -> bool:
    """Older than MaximumEventAgeInSeconds: dropped, never run."""
    return now - item.born > options.max_event_age


def loop_cut(item: Invocation, options: QueueOptions) -> bool:
    """An invocation with 16 of its chain before it, where loops are not allowed."""
    return item.lineage >= LOOP_LIMIT and not options.allow_loops


def next_backoff(item: Invocation, options: QueueOptions) -> float:
    """A throttled event's wait: the first step, then doubled each time, up to the cap."""
    first, cap = options.throttle_backoff
    return first if item.backoff == 0 else min(cap, item.backoff * 2)


def next_try(item: Invocation, options: QueueOptions) -> tuple[Invocation, float] | None:
    """A failed event's next try and its delay, or None once its retries are exhausted."""
    if item.tries >= min(options.max_retries, len(options.retry_delays)):
        return None
    again = Invocation(item.event, item.lineage, item.born, item.request_id, item.tries + 1)
    again.to_destination = item.to_destination
    return again, options.retry_delays[item.tries]


def failure_record(
    item: Invocation, condition: str, *, function_arn: str, now: float
) -> dict[str, Any]:
    """Lambda's record of an event it gave up on, as its on-failure destination receives
    it ("Capturing records of Lambda asynchronous invocations"): condition is
    RetriesExhausted or EventAgeExceeded."""
    record: dict[str, Any] = {
        "version": "1.0",
        "timestamp": datetime.fromtimestamp(now, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "requestContext": {
            "requestId": item.request_id,
            "functionArn": f"{function_arn}:$LATEST",
            "condition": condition,
            "approximateInvokeCount": item.tries + (1 if item.started else 0),
        },
        "requestPayload": item.event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
    }
    if item.failure is not None:
        record["responseContext"]["functionError"] = "Unhandled"
        record["responsePayload"] = item.failure
    return record
