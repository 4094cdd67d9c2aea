"""Worker Lambda: parse the kick (or tick, or batch of failed kicks), drain, report.

The logic lives in pgkick.worker.runtime and pgkick.aws.failed_kicks. Every path that
drains emits the same job counts (the failed-jobs alarm must see a tick's failures).

Its first statement starts the database connection of an on-demand cold start, so that
the imports below it (and the app's task modules, at `Runtime.from_env`) overlap its
waits (pgkick.worker.cold_start); hence the imports after a statement."""

from __future__ import annotations

from pgkick.worker.cold_start import connect_ahead

early = connect_ahead()

import os
from collections.abc import Mapping
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from pgkick.aws import failed_kicks
from pgkick.aws.results import BatchResult, Rejected, TickResult, WorkerResult
from pgkick.errors import BadEvent
from pgkick.kick.kickers import parse_kick_event
from pgkick.worker.runtime import Runtime

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "pgkick-worker")
copy_config_to_registered_loggers(source_logger=logger, include={"pgkick"})
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "pgkick")
runtime = Runtime.from_env(early)  # cold start: settings, tasks, kicker

type Answer = WorkerResult | TickResult | Rejected | BatchResult
COUNTS = {
    "claimed": "claimed",
    "done": "succeeded",
    "failed": "failed",
    "retried": "retried",
    "lost": "lost_lease",
}


def count(summary: Mapping[str, Any]) -> None:
    """The job counts of one drain (a kick's, a tick's, a failed kick's)."""
    for field, metric in COUNTS.items():
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=summary[field])
    metrics.add_metric(name="duration", unit=MetricUnit.Milliseconds, value=summary["duration_ms"])


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: Any, context: LambdaContext) -> Answer:
    try:
        return answer(event, context)
    finally:
        runtime.end_invocation()


def answer(event: Any, context: LambdaContext) -> Answer:
    """The event parsed, the drain (or tick, or failed kicks) run, its counts emitted."""
    remaining = context.get_remaining_time_in_millis
    if failed_kicks.is_sqs_event(event):  # FailedKicksQueue: dropped kicks and wake-ups
        failed, summaries, batch = failed_kicks.drain_records(
            event,
            lambda queue, reason: runtime.drain(queue, remaining, reason=reason).as_dict(),
            lambda tick: runtime.tick(tick, remaining),
        )
        for drained in summaries:
            count(drained)
        metrics.add_metric(name="failed_kicks_drained", unit=MetricUnit.Count, value=len(summaries))
        metrics.add_metric(name="rejected", unit=MetricUnit.Count, value=batch.dropped)
        logger.info("drained failed kicks", extra={"summaries": summaries, "handed_back": failed})
        return BatchResult(batchItemFailures=[{"itemIdentifier": m} for m in failed])
    if isinstance(event, dict) and "periodic" in event:  # a recurring schedule's tick
        try:
            ticked = runtime.tick(event, remaining)
        except ValueError as exc:  # answered, not raised: a retry would fail the same way
            logger.error("rejected tick event", extra={"reason": str(exc)})
            return Rejected(rejected=str(exc))
        if "rejected" not in ticked:
            count(ticked)
        return cast(TickResult, ticked)
    try:
        kick = parse_kick_event(event)
    except BadEvent as exc:
        logger.error("rejected kick event", extra={"reason": str(exc)})
        metrics.add_metric(name="rejected", unit=MetricUnit.Count, value=1)
        return Rejected(rejected=str(exc))
    logger.append_keys(queue=kick.queue, hop=kick.hop)
    summary = runtime.drain(kick.queue, remaining, hop=kick.hop, reason=kick.reason)
    result = cast(WorkerResult, summary.as_dict())
    count(result)
    logger.info("drained", extra={"summary": result})
    return result
