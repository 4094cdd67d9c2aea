"""What EventBridge Scheduler does when it cannot deliver a schedule's event to its target.

Why its own module: a stand-in kinder than AWS here hides what a deploy would lose. As AWS
documents for every schedule's target ("Configuring a retry policy", "Configuring a
dead-letter queue", Scheduler User Guide): a failed delivery (the target throttled the
invoke, the function is gone, a permission is missing) is retried with backoff until the
schedule's RetryPolicy runs out, MaximumRetryAttempts (0-185, default 185) or
MaximumEventAgeInSeconds (60-86,400, default 86,400, counted from the scheduled time); the
event is then sent to the target's DeadLetterConfig queue, whose message body is the
target's Input, or dropped (InvocationDroppedCount) when there is none.

The local stack has no SQS: dead letters are kept here (`letters`) and handed to the stack,
which delivers them to the worker as SQS events in small batches, as the template's event
source mapping on FailedKicksQueue does (pgkick_dev.devserver.stack).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The template's FailedKicksQueue, stood in: schedules booked locally name it as their
# DeadLetterConfig, and the stack hands its letters to the worker.
LOCAL_DLQ_ARN = "arn:aws:sqs:us-east-1:123456789012:pgkick-failed-kicks"
DEFAULT_ATTEMPTS = 185  # AWS's default MaximumRetryAttempts
DEFAULT_AGE = 86_400  # AWS's default MaximumEventAgeInSeconds
FIRST_RETRY = 1.0  # seconds; doubled each time (with jitter), up to MAX_RETRY_DELAY
MAX_RETRY_DELAY = 300.0


class DeliveryFailed(Exception):
    """The target refused the scheduler's invoke: `code` says how (AWS's error code)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class DeadLetter:
    """A message on the target's dead-letter queue: the Input, and Scheduler's attributes."""

    queue_arn: str
    body: str
    attributes: dict[str, str]
    message_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def sqs_record(self) -> dict[str, Any]:
        """The record an SQS event source mapping hands the function for this message."""
        return {
            "messageId": self.message_id,
            "receiptHandle": self.message_id,
            "body": self.body,
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {
                name: {"stringValue": value, "dataType": "String"}
                for name, value in self.attributes.items()
            },
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.queue_arn.split(":")[3] if self.queue_arn.count(":") >= 5 else "",
        }


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = DEFAULT_ATTEMPTS
    max_age: float = DEFAULT_AGE

    @classmethod
    def of(cls, target: dict[str, Any]) -> RetryPolicy:
        given = target.get("RetryPolicy") or {}
        return cls(
            attempts=int(given.get("MaximumRetryAttempts", DEFAULT_ATTEMPTS)),
            max_age=float(given.get("MaximumEventAgeInSeconds", DEFAULT_AGE)),
        )


@dataclass
class Delivery:
    """One firing's event on its way to the target: tried, retried, then dead-lettered."""

    schedule: str  # group/name, for the timeline and the dead letter's attributes
    target: dict[str, Any]
    event: Any
    due: float  # the scheduled time: the event's age counts from here
    retries: int = 0

    def next_delay(self, rand: random.Random) -> float:
        """The backoff before the next try: doubling from 1 s, jittered, at most 5 minutes."""
        ceiling = min(MAX_RETRY_DELAY, FIRST_RETRY * 2**self.retries)
        return rand.uniform(ceiling / 2, ceiling)

    def exhausted(self, now: float, delay: float) -> str | None:
        """Which limit of the RetryPolicy forbids another try in `delay` s (None: neither)."""
        policy = RetryPolicy.of(self.target)
        if self.retries >= policy.attempts:
            return "MaximumRetryAttempts"
        if now + delay - self.due > policy.max_age:
            return "MaximumEventAgeInSeconds"
        return None

    def dead_letter(self, failure: DeliveryFailed, condition: str) -> DeadLetter | None:
        arn = (self.target.get("DeadLetterConfig") or {}).get("Arn")
        if not arn:
            return None
        return DeadLetter(
            str(arn),
            json.dumps(self.event),
            {
                "ERROR_CODE": failure.code,
                "ERROR_MESSAGE": str(failure)[:200],
                "EXHAUSTED_RETRY_CONDITION": condition,
                "RETRY_ATTEMPTS": str(self.retries),
                "SCHEDULE_ARN": self.schedule,
                "TARGET_ARN": str(self.target.get("Arn", "")),
            },
        )


Deliver = Callable[[str, Any], None]  # (function name, event); raises DeliveryFailed
