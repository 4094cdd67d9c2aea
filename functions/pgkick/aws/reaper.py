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


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: Any, context: LambdaContext) -> ReaperResult:
    report = cast(ReaperResult, runtime.reap())
    for name in ("requeued", "failed", "purged"):
        metrics.add_metric(name=f"reaper_{name}", unit=MetricUnit.Count, value=report[name])
    for queue in report["queues"]:
        metrics.add_metric(name="ready", unit=MetricUnit.Count, value=queue["ready"])
        if queue["oldest_ready_seconds"] is not None:
            metrics.add_metric(
                name="oldest_ready_age",
                unit=MetricUnit.Seconds,
                value=float(queue["oldest_ready_seconds"]),
            )
    metrics.add_metric(
        name="jobs_dead_tuples", unit=MetricUnit.Count, value=report["table"].get("n_dead_tup") or 0
    )
    logger.info("reaped", extra={"report": report})
    return report
