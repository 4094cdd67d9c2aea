"""Where the stack's undeliverable events go: Lambda's on-failure records and Scheduler's
dead letters, onto the queue the worker's SQS event source drains.

Why its own module: on AWS these are three services' doings (Lambda's destination,
Scheduler's DeadLetterConfig, the SQS event source mapping) joined by one queue ARN,
FailedKicksQueue. Here one object routes a letter by that ARN to the function whose
event source reads it (pgkick_dev.devserver.sqs_source: batches of its BatchSize, a
record it could not drain received again after the visibility timeout), so the stack
(pgkick_dev.devserver.stack) keeps to functions and bookings.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pgkick_dev.devserver.clock import Clock
from pgkick_dev.devserver.invocations import Invocation, failure_record
from pgkick_dev.devserver.queue import AsyncQueue
from pgkick_dev.devserver.scheduler_delivery import DeadLetter
from pgkick_dev.devserver.sqs_source import SqsEventSource
from pgkick_dev.devserver.timeline import Timeline

if TYPE_CHECKING:
    from pgkick_dev.devserver.stack import FunctionSpec


class DeadLetters:
    """The SQS event sources the stack's dead letters feed, made at the first letter."""

    def __init__(
        self,
        specs: dict[str, FunctionSpec],
        function: Callable[[str], AsyncQueue | None],
        *,
        clock: Clock,
        timeline: Timeline,
        lock: threading.Condition,
        write_log: Callable[[str], None],
    ) -> None:
        """function: the stack's lookup of a function by name or ARN (None: no such one)."""
        self.specs, self.function = specs, function
        self.clock, self.timeline, self.lock, self.write_log = clock, timeline, lock, write_log
        self.sources: dict[str, SqsEventSource] = {}  # by the function draining them

    def on_failure_for(self, spec: FunctionSpec) -> Callable[[Invocation, str], None] | None:
        """The function's on-failure destination (None: none configured): Lambda's record
        of the dropped event, as an SQS message on the destination queue."""
        destination = spec.on_failure
        if destination is None:
            return None
        arn = f"arn:aws:lambda:us-east-1:123456789012:function:{spec.name}"

        def send(item: Invocation, condition: str) -> None:
            record = failure_record(item, condition, function_arn=arn, now=self.clock.now())
            self.route(DeadLetter(destination, json.dumps(record), {}))

        return send

    def route(self, letter: DeadLetter) -> None:
        """A dead letter or an on-failure record: onto the queue its consumer's SQS event
        source drains; the scheduler keeps every dead letter too."""
        consumer = self._consumer(letter)
        with self.lock:
            source = self.sources.get(consumer)
            if source is None:
                queue = self.function(consumer)
                if queue is None:
                    self.write_log(
                        f"pgkick dev: dead letter for {consumer!r} dropped: no such function"
                    )
                    return
                spec = self.specs[queue.function]
                source = self.sources[consumer] = SqsEventSource(
                    queue,
                    batch_size=spec.drain_batch,
                    visibility=spec.drain_visibility,
                    retention=spec.drain_retention,
                    clock=self.clock,
                    timeline=self.timeline,
                    lock=self.lock,
                )
        source.send(letter)

    def close(self) -> None:
        for source in self.sources.values():
            source.close()

    def _consumer(self, letter: DeadLetter) -> str:
        """The function whose SQS event source reads the letter's queue (the worker on
        FailedKicksQueue), else the schedule's own target."""
        for spec in self.specs.values():
            if spec.drains is not None and spec.drains == letter.queue_arn:
                return spec.name
        return letter.attributes.get("TARGET_ARN", "")
