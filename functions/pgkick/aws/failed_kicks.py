"""FailedKicksQueue, drained by the worker: a kick or wake-up that AWS gave up on becomes a run.

Why: Lambda drops a kick after its retries or its maximum age, and Scheduler drops a
wake-up it cannot deliver; each is committed work that nothing else runs until the
daily reaper. Both can put what they dropped in one SQS queue, and the worker reads
it (an SQS event source, ReportBatchItemFailures). A record is one of:

- Lambda's on-failure destination record (an asynchronous invocation that failed):
  a JSON body whose `requestPayload` is the original event, with `requestContext`
  (condition RetriesExhausted or EventAgeExceeded). AWS Lambda Developer Guide,
  "Capturing records of Lambda asynchronous invocations"
  (docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).
- EventBridge Scheduler's dead letter: the body is the schedule's target input, the
  wake-up event itself; the error rides in message attributes (ERROR_CODE,
  SCHEDULE_ARN...). EventBridge Scheduler User Guide, "Configuring a dead-letter queue"
  (docs.aws.amazon.com/scheduler/latest/UserGuide/configuring-schedule-dlq.html).

The original event is a kick ({"queue": ...}, pgkick.kick.kickers.kick_event), a periodic
tick ({"periodic": ..., "tick": ...}), or the reaper's own schedule input (a failed reaper
run: logged, its alarm is ReaperErrorsAlarm; the next run does the work). Kicks are
grouped by queue (one drain per queue, however many records name it); a drain that
raises answers its records in `batchItemFailures` so SQS hands them back later; a record
that is not one of these is logged and dropped: a retry would fail the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pgkick.errors import BadEvent
from pgkick.kick.kickers import parse_kick_event

log = logging.getLogger("pgkick.failed_kicks")

REAPER_SOURCE = "pgkick.reaper-schedule"  # template.yaml: the reaper schedule's Input


def is_sqs_event(event: object) -> bool:
    """An SQS event source's batch (Lambda's SQS event: Records of eventSource aws:sqs)."""
    if not isinstance(event, Mapping) or not isinstance(event.get("Records"), list):
        return False
    return all(
        isinstance(r, Mapping) and r.get("eventSource") == "aws:sqs" for r in event["Records"]
    )


def original_event(body: str) -> tuple[str, dict[str, Any]]:
    """What was dropped, from a record's body: (origin, the event). BadEvent if neither
    shape. origin: "lambda" (an on-failure record) or "scheduler" (a dead letter)."""
    try:
        parsed = json.loads(body)
    except (TypeError, ValueError, RecursionError):  # nested past the parser's depth too
        raise BadEvent(f"failed-kick record body is not JSON: {str(body)[:100]!r}") from None
    if not isinstance(parsed, dict):
        raise BadEvent(f"failed-kick record body is not a JSON object: {str(body)[:100]!r}")
    if "requestContext" in parsed and "requestPayload" in parsed:
        payload = parsed["requestPayload"]
        if not isinstance(payload, dict):
            raise BadEvent(f"on-failure record's requestPayload is not an object: {payload!r}")
        return "lambda", payload
    return "scheduler", parsed


class Batch:
    """The records of one SQS batch, sorted by what they ask for (a plain class:
    pgkick.kick.throttle.Backoff says why)."""

    __slots__ = ("dropped", "kicks", "reaper_runs", "reasons", "ticks")

    def __init__(self) -> None:
        self.kicks: dict[str, list[str]] = {}  # queue -> message ids
        self.reasons: dict[str, str] = {}  # queue -> "rescue" or the first
        self.ticks: list[tuple[str, dict[str, Any]]] = []  # (message id, event)
        self.dropped = 0
        self.reaper_runs = 0


def sort_records(records: list[Mapping[str, Any]]) -> Batch:
    batch = Batch()
    for record in records:
        message = str(record.get("messageId", "?"))
        try:
            origin, event = original_event(str(record.get("body", "")))
            if event.get("source") == REAPER_SOURCE:
                batch.reaper_runs += 1
                log.error(
                    "a reaper run failed (its record is dropped; the next run does the work)",
                    extra={"message_id": message, "record": record.get("body", "")[:2000]},
                )
                continue
            if "periodic" in event:
                # imported here: schedules are rare, and a kick's cold start skips them
                from pgkick.tasks.recurring import parse_tick

                parse_tick(event)  # a malformed tick is dropped here, before any run
                batch.ticks.append((message, event))
                continue
            kick = parse_kick_event(event)
        except Exception as exc:  # one record's, never the batch's
            # Any record that cannot be read is dropped alone: raised, it failed the whole
            # batch, and SQS handed every record of it back, the good kicks with it, each
            # time the bad one was batched with them, for the queue's retention (14 days).
            batch.dropped += 1
            log.error(
                "dropped a failed-kick record that is not a kick, a tick or a reaper run",
                extra={"message_id": message, "reason": f"{type(exc).__name__}: {exc}"[:500]},
            )
            continue
        log.warning(
            "a %s kick of queue %s was dropped by AWS: draining it now",
            origin,
            kick.queue,
            extra={"message_id": message, "queue": kick.queue, "origin": origin},
        )
        batch.kicks.setdefault(kick.queue, []).append(message)
        if kick.reason == "rescue" or kick.queue not in batch.reasons:
            batch.reasons[kick.queue] = kick.reason
    return batch


def drain_records(
    event: Mapping[str, Any],
    drain: Callable[[str, str], Mapping[str, Any]],
    tick: Callable[[Mapping[str, Any]], Mapping[str, Any]],
) -> tuple[list[str], list[Mapping[str, Any]], Batch]:
    """Run what each record asks for. drain(queue, reason) and tick(event) return the run's
    summary. Returns (message ids to hand back, the summaries, the sorted batch).

    A run that raises hands its records back (SQS redelivers them after the queue's
    visibility timeout): the database may be down now, and the job is still committed.
    A drain starts a new chain (hop 0): the chain the dropped kick belonged to ended.
    A tick whose periodic is no longer declared is dropped like a malformed record."""
    batch = sort_records(list(event["Records"]))
    failed: list[str] = []
    summaries: list[Mapping[str, Any]] = []
    for queue, messages in batch.kicks.items():
        try:
            summaries.append(drain(queue, batch.reasons[queue]))
        except Exception:
            log.exception("could not drain queue %s for a failed kick: handed back", queue)
            failed += messages
    for message, tick_event in batch.ticks:
        try:
            summary = tick(tick_event)
        except Exception:
            log.exception("could not run a failed tick: handed back")
            failed.append(message)
            continue
        if "rejected" in summary:  # its periodic is no longer declared
            batch.dropped += 1
            log.error("dropped a failed tick record", extra={"reason": summary["rejected"]})
        else:
            summaries.append(summary)
    return failed, summaries, batch
