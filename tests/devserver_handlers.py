"""Handlers the dev server's tests run in its execution environments (FunctionSpec.handler)."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any


def echo(event: Any, context: Any) -> dict[str, Any]:
    return {"echo": event, "request_id": context.aws_request_id}


def boom(event: Any, context: Any) -> dict[str, Any]:
    raise ValueError("boom")


def gate(event: Any, context: Any) -> dict[str, Any]:
    """Waits until the file $PGKICK_TEST_GATE exists: an invocation the test holds busy."""
    path = Path(os.environ["PGKICK_TEST_GATE"])
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"gated": event}


_ticks = [0]


def ticker(event: Any, context: Any) -> dict[str, Any]:
    """Starts (once) a background thread counting every 10 ms, as an app's thread would."""
    if not getattr(ticker, "started", False):
        ticker.started = True  # type: ignore[attr-defined]

        def count() -> None:
            while True:
                _ticks[0] += 1
                time.sleep(0.01)

        threading.Thread(target=count, daemon=True).start()
    return {"pid": os.getpid(), "ticks": _ticks[0]}


def unmarshallable(event: Any, context: Any) -> dict[str, Any]:
    """Answers with a datetime, which Lambda's runtime cannot send back."""
    from datetime import UTC, datetime

    return {"at": datetime.now(UTC)}


def context_seen(event: Any, context: Any) -> dict[str, Any]:
    """What the handler sees of Lambda's context object, as awslambdaric builds it."""
    return {
        "remaining_ms": context.get_remaining_time_in_millis(),
        "memory_limit_in_mb": context.memory_limit_in_mb,
        "function_name": context.function_name,
        "function_version": context.function_version,
        "arn": context.invoked_function_arn,
        "log_group_name": context.log_group_name,
        "aws_request_id": context.aws_request_id,
        # not the context's, the environment's: Lambda sets it in every environment
        "initialization_type": os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE"),
        # the Invoke's ClientContext as awslambdaric hands it over (None when none came)
        "client_context": getattr(context.client_context, "custom", None)
        if context.client_context
        else None,
    }


def logs_at_each_level(event: Any, context: Any) -> dict[str, Any]:
    """Logs one line per level through Powertools' Logger, as pgkick's handlers log."""
    from aws_lambda_powertools import Logger

    logger = Logger(service="levels")
    logger.debug("DEBUG-LINE")
    logger.info("INFO-LINE")
    logger.warning("WARNING-LINE")
    return {"level": logging.getLevelName(logger.log_level)}


_inits = [0]


def sleeper(event: Any, context: Any) -> dict[str, Any]:
    """Sleeps `event["sleep"]` seconds; says its pid and how many invocations this
    process's module has seen (1: a fresh, cold init)."""
    _inits[0] += 1
    time.sleep(float(event.get("sleep", 0)))
    return {"pid": os.getpid(), "invocations": _inits[0]}


def touch_database(event: Any, context: Any) -> dict[str, Any]:
    """Holds a session busy on $DATABASE_URL for a moment, as application 'pgkick-test-app'."""
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], application_name="pgkick-test-app") as conn:
        conn.execute("SELECT pg_sleep(0.5)")
    return {"touched": True}


def worker_refusing_kicks(event: Any, context: Any) -> Any:
    """pgkick's worker, except that a kick fails (as a worker whose database is down would):
    only an SQS batch (FailedKicksQueue's records) reaches the real handler."""
    if not (isinstance(event, dict) and "Records" in event):
        raise RuntimeError("kick refused (the test's stand-in for a failing worker)")
    from pgkick.aws.worker import handler

    return handler(event, context)


def hog(event: Any, context: Any) -> dict[str, Any]:
    """Touches event["mb"] MB of memory, then answers."""
    block = b"x" * (int(event["mb"]) * 1024 * 1024)
    return {"touched_mb": len(block) // 2**20}


def sqs_partial(event: Any, context: Any) -> dict[str, Any]:
    """An asynchronous event fails (so Lambda's on-failure record reaches FailedKicksQueue);
    an SQS batch answers with batchItemFailures naming the records whose original event
    said {"fail": true}, and each record's ApproximateReceiveCount."""
    import json

    if not (isinstance(event, dict) and "Records" in event):
        raise RuntimeError("kick refused (the test's stand-in for a failing worker)")
    failed, receives = [], []
    for record in event["Records"]:
        receives.append(int(record["attributes"]["ApproximateReceiveCount"]))
        if json.loads(record["body"])["requestPayload"].get("fail"):
            failed.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failed, "receives": receives}


def prints(event: Any, context: Any) -> dict[str, Any]:
    """Prints `event["say"]`, `event.get("times", 1)` times: an invocation's own log lines."""
    for _ in range(int(event.get("times", 1))):
        print(event["say"])
    return {"said": event["say"]}
