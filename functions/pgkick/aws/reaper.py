"""Reaper Lambda, on a schedule slower than the database's suspend window: re-queue expired
leases, kick ready queues, purge, report. The logic lives in pgkick.worker.reaper."""

from __future__ import annotations

import os
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from pgkick.aws.results import ReaperResult
from pgkick.worker.runtime import Runtime

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "pgkick-reaper")
copy_config_to_registered_loggers(source_logger=logger, include={"pgkick"})
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "pgkick")
runtime = Runtime.from_env()


def report_health(report: dict[str, Any]) -> None:
    """The health metrics, flushed at once: before the purge, so that a run the timeout
    cuts still feeds the oldest-ready-job alarm and the dashboard. A paused queue's jobs wait
    for `pgkick resume`, not for a lost kick: its age (in the report) is no alarm's."""
    for name in ("requeued", "failed"):
        metrics.add_metric(name=f"reaper_{name}", unit=MetricUnit.Count, value=report[name])
    for queue in report["queues"]:
        metrics.add_metric(name="ready", unit=MetricUnit.Count, value=queue["ready"])
        if queue["oldest_ready_seconds"] is not None and not queue["paused"]:
            metrics.add_metric(
                name="oldest_ready_age",
                unit=MetricUnit.Seconds,
                value=float(queue["oldest_ready_seconds"]),
            )
    metrics.add_metric(
        name="jobs_dead_tuples", unit=MetricUnit.Count, value=report["table"].get("n_dead_tup") or 0
    )
    metrics.flush_metrics()
    logger.info("queue health", extra={"report": report})


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: Any, context: LambdaContext) -> ReaperResult:
    report = cast(
        ReaperResult, runtime.reap(context.get_remaining_time_in_millis, on_health=report_health)
    )
    metrics.add_metric(name="reaper_purged", unit=MetricUnit.Count, value=report["purged"])
    # 1: the purge stopped for time and left older finished jobs to the next run
    metrics.add_metric(
        name="reaper_purge_left", unit=MetricUnit.Count, value=0 if report["purge_complete"] else 1
    )
    logger.info("reaped", extra={"report": report})
    return report
