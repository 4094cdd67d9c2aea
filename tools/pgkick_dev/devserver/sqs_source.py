"""An SQS queue and the event source mapping that drains it into a function, stood in.

Why its own module, and why faithful: the worker drains FailedKicksQueue (Lambda's
on-failure records of lost kicks, Scheduler's dead wake-ups) through an SQS event source,
and what AWS does with a record the worker could not drain decides whether a lost kick is
lost for good. As AWS documents ("Using Lambda with Amazon SQS", "Handling errors for an
SQS event source"):
- the mapping receives up to BatchSize messages and invokes the function synchronously
  (no asynchronous retries, no on-failure destination);
- a message the function does not list in `batchItemFailures` (ReportBatchItemFailures)
  is deleted; one it lists, or every message of a batch whose invocation failed (raised,
  timed out, crashed) or whose answer is malformed, stays on the queue and is received
  again once its VisibilityTimeout has passed (900 s in pgkick's template), its
  ApproximateReceiveCount one higher;
- a throttled invoke is retried with backoff (1 s, doubling, at most 5 minutes) while the
  batch's visibility timeout lasts, then its messages are received again;
- a message older than the queue's MessageRetentionPeriod (14 days in the template) is
  deleted by SQS, drained or not.
The stand-in used to hand a batch over as an asynchronous event: retried after 1 and 2
minutes, then dropped, where AWS keeps trying every 15 minutes for 14 days.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from dataclasses import dataclass
from typing import Any

from pgkick_dev.devserver.clock import Clock
from pgkick_dev.devserver.invocations import THROTTLE_BACKOFF, LoopStopped, Throttled
from pgkick_dev.devserver.queue import AsyncQueue
from pgkick_dev.devserver.scheduler_delivery import DeadLetter
from pgkick_dev.devserver.timeline import Timeline

log = logging.getLogger("pgkick_dev.devserver.sqs_source")


@dataclass
class Message:
    letter: DeadLetter
    sent_at: float
    visible_at: float  # received again from this moment (0: at once)
    receives: int = 0  # ApproximateReceiveCount

    def record(self) -> dict[str, Any]:
        record = self.letter.sqs_record()
        record["attributes"] = {
            **record["attributes"],
            "ApproximateReceiveCount": str(self.receives),
        }
        return record


@dataclass
class Batch:
    messages: list[Message]
    received_at: float
    backoff: float = 0.0

    @property
    def ids(self) -> set[str]:
        return {m.letter.message_id for m in self.messages}


class SqsEventSource:
    """One queue drained into one function: its messages, their visibility, the mapping."""

    def __init__(
        self,
        function: AsyncQueue,
        *,
        batch_size: int,
        visibility: int,
        retention: int,
        clock: Clock,
        timeline: Timeline,
        lock: threading.Condition,
    ) -> None:
        self.function = function
        self.batch_size = batch_size
        self.visibility = visibility
        self.retention = retention
        self.messages: list[Message] = []  # on the queue: visible, or in flight
        self.deleted = 0  # drained (not reported failed)
        self.expired = 0  # deleted by the retention period, never drained
        self._clock = clock
        self._timeline = timeline
        self._lock = lock
        self._armed_at: float | None = None
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def send(self, letter: DeadLetter) -> None:
        """SendMessage: visible at once; the mapping polls at the next turn of the clock."""
        with self._lock:
            now = self._clock.now()
            self.messages.append(Message(letter, now, now))
            self._arm(now)

    def waiting(self) -> bool:
        """Under the lock: a message visible now (the mapping is about to receive it)."""
        now = self._clock.now()
        return any(m.visible_at <= now for m in self.messages)

    # -- the mapping --------------------------------------------------------------------
    def _arm(self, at: float) -> None:
        if self._armed_at is not None and self._armed_at <= at:
            return
        self._armed_at = at
        self._clock.call_later(max(0.0, at - self._clock.now()), self._poll)

    def _poll(self) -> None:
        with self._lock:
            self._armed_at = None
            if self._closed:
                return
            now = self._clock.now()
            for message in [m for m in self.messages if now - m.sent_at >= self.retention]:
                self.messages.remove(message)
                self.expired += 1
                self._note("drop", f"SQS message {message.letter.message_id} past retention")
            visible = [m for m in self.messages if m.visible_at <= now]
            for start in range(0, len(visible), self.batch_size):
                chunk = visible[start : start + self.batch_size]
                for message in chunk:
                    message.receives += 1
                    message.visible_at = now + self.visibility
                self._invoke(Batch(chunk, now))
            self._arm_next()

    def _arm_next(self) -> None:
        if self.messages:
            self._arm(min(m.visible_at for m in self.messages))

    def _invoke(self, batch: Batch) -> None:
        """Under the lock: the batch to the function, synchronously as the mapping does."""
        event = {"Records": [m.record() for m in batch.messages]}
        try:
            request_id, answer = self.function.start_sync(event)
        except (Throttled, LoopStopped):
            self._throttled(batch)
            return
        self._note("kick", f"SQS batch of {len(batch.messages)}", request_id=request_id)
        answer.add_done_callback(lambda done: self._answered(batch, done))

    def _throttled(self, batch: Batch) -> None:
        """Retried with backoff within the visibility timeout; then received again."""
        low, high = THROTTLE_BACKOFF
        batch.backoff = min(high, batch.backoff * 2) if batch.backoff else low
        now = self._clock.now()
        if now + batch.backoff >= batch.received_at + self.visibility:
            self._note("throttle", "SQS batch: visible again after its visibility timeout")
            return  # the poll armed for visible_at receives its messages again
        self._note("throttle", f"SQS batch: backoff {batch.backoff:g} s")

        def again() -> None:
            with self._lock:
                live = [m for m in batch.messages if m in self.messages]
                if live and not self._closed:
                    self._invoke(Batch(live, batch.received_at, batch.backoff))

        self._clock.call_later(batch.backoff, again)

    def _answered(self, batch: Batch, done: concurrent.futures.Future[dict[str, Any]]) -> None:
        with self._lock:
            message = done.result()
            failed = self._failed_ids(batch, message)
            for m in batch.messages:
                if m.letter.message_id not in failed and m in self.messages:
                    self.messages.remove(m)
                    self.deleted += 1
            if failed:
                self._note("retry", f"{len(failed)} SQS message(s) back after {self.visibility} s")
            self._arm_next()
            self._lock.notify_all()

    @staticmethod
    def _failed_ids(batch: Batch, message: dict[str, Any]) -> set[str]:
        """The messages that stay: all of them for a failed invocation or an answer AWS
        cannot read, else those in batchItemFailures."""
        if message.get("failure") is not None:
            return batch.ids
        result = message.get("result")
        if result is None or not isinstance(result, dict):
            return set()
        failures = result.get("batchItemFailures")
        if failures is None:
            return set()
        if not isinstance(failures, list):
            return batch.ids
        ids = batch.ids
        named = {f.get("itemIdentifier") if isinstance(f, dict) else None for f in failures}
        if not named <= ids:  # an empty, null or unknown identifier: the whole batch
            return ids
        return {str(n) for n in named}

    def _note(self, kind: str, detail: str, request_id: str | None = None) -> None:
        self._timeline.record(
            kind, function=self.function.function, request_id=request_id, detail=detail
        )
