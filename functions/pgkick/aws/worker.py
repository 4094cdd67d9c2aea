"""Worker Lambda: parse the kick, drain the queue, report.

The logic lives in pgkick.worker.runtime."""

from __future__ import annotations

import os
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from pgkick.aws.results import Rejected, TickResult, WorkerResult
from pgkick.errors import BadEvent
from pgkick.kick.kickers import parse_kick_event
from pgkick.worker.runtime import Runtime

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "pgkick-worker")
copy_config_to_registered_loggers(source_logger=logger, include={"pgkick"})
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "pgkick")
runtime = Runtime.from_env()  # cold start: settings, tasks, kicker; no database yet

COUNTS = {
    "claimed": "claimed",
    "done": "succeeded",
    "failed": "failed",
    "retried": "retried",
    "lost": "lost_lease",
}


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: Any, context: LambdaContext) -> WorkerResult | TickResult | Rejected:
    if isinstance(event, dict) and "periodic" in event:  # a recurring schedule's tick
        try:
            return cast(TickResult, runtime.tick(event, context.get_remaining_time_in_millis))
        except ValueError as exc:  # answered, not raised: a retry would fail the same way
            logger.error("rejected tick event", extra={"reason": str(exc)})
            return Rejected(rejected=str(exc))
    try:
        kick = parse_kick_event(event)
    except BadEvent as exc:
        logger.error("rejected kick event", extra={"reason": str(exc)})
        metrics.add_metric(name="rejected", unit=MetricUnit.Count, value=1)
        return Rejected(rejected=str(exc))
    logger.append_keys(queue=kick.queue, hop=kick.hop)
    summary = runtime.drain(
        kick.queue, context.get_remaining_time_in_millis, hop=kick.hop, reason=kick.reason
    )
    for field, metric in COUNTS.items():
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=getattr(summary, field))
    metrics.add_metric(name="duration", unit=MetricUnit.Milliseconds, value=summary.duration_ms)
    result = cast(WorkerResult, summary.as_dict())
    logger.info("drained", extra={"summary": result})
    return result
