"""The worker handler on its three paths, each emitting its job counts: a batch from
FailedKicksQueue (a dropped kick or wake-up becomes a run), a periodic tick, a kick.

The SQS records are shaped as AWS documents them:
- the SQS event: AWS Lambda Developer Guide, "Using Lambda with Amazon SQS", example
  standard queue message event (docs.aws.amazon.com/lambda/latest/dg/with-sqs.html);
- a failed asynchronous invocation's record (the body): "Capturing records of Lambda
  asynchronous invocations", example invocation record
  (docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html);
- Scheduler's dead letter: the body is the target's input, the error in message
  attributes ("Configuring a dead-letter queue", retrieving the dead-letter event,
  docs.aws.amazon.com/scheduler/latest/UserGuide/configuring-schedule-dlq.html).
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick.kick.kickers import kick_event
from pgkick.tasks.recurring import periodic_registry
from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import load_handler, seed, sessions_of
from tests.store import JobStore

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:pgkick-FailedKicksQueue-AbCdEf"
WORKER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:pgkick-worker:$LATEST"
TICK = "2026-12-01T03:00:00Z"


def sqs_record(body: str, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "MessageReceiptHandle",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1764558000000",
            "SenderId": "AROAEXAMPLE:awslambda_123_20261201000000000",
            "ApproximateFirstReceiveTimestamp": "1764558000010",
        },
        "messageAttributes": attributes or {},
        "md5OfBody": "0" * 32,
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def on_failure_record(payload: Any, condition: str = "RetriesExhausted") -> str:
    """Lambda's on-failure destination record for an asynchronous invocation."""
    record: dict[str, Any] = {
        "version": "1.0",
        "timestamp": "2026-12-01T00:00:05.568Z",
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": WORKER_ARN,
            "condition": condition,
            "approximateInvokeCount": 3 if condition == "RetriesExhausted" else 0,
        },
        "requestPayload": payload,
    }
    if condition == "RetriesExhausted":
        record["responseContext"] = {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        }
        record["responsePayload"] = {
            "errorMessage": "cannot connect to PostgreSQL: connection refused",
            "errorType": "DatabaseUnavailable",
        }
    return json.dumps(record)


def attribute(value: str) -> dict[str, Any]:
    return {
        "stringValue": value,
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }


def dead_letter(payload: dict[str, Any]) -> dict[str, Any]:
    """Scheduler's dead letter: the wake-up's Input as the body."""
    return sqs_record(
        json.dumps(payload),
        {
            "ERROR_CODE": attribute("Lambda.TooManyRequestsException"),
            "ERROR_MESSAGE": attribute("Rate exceeded"),
            "EXECUTION_ID": attribute(str(uuid.uuid4())),
            "SCHEDULE_ARN": attribute(
                "arn:aws:scheduler:us-east-1:123456789012:schedule/pgkick-wakes/wake-default-x"
            ),
            "TARGET_ARN": attribute(WORKER_ARN.removesuffix(":$LATEST")),
        },
    )


@pytest.fixture
def worker_env(dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    return dsn


def statuses(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT queue || ':' || status, count(*) FROM pgkick.jobs GROUP BY 1")
        return dict(rows.fetchall())


def emitted(output: str) -> list[dict[str, Any]]:
    """The EMF blobs Powertools printed (one per flush), as CloudWatch would read them."""
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]


def total(blobs: list[dict[str, Any]], metric: str) -> float:
    found = 0.0
    for blob in blobs:
        value = blob.get(metric, 0)
        found += sum(value) if isinstance(value, list) else value
    return found


def test_dropped_kicks_and_dead_wake_ups_become_drains_of_their_queues(
    worker_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a FailedKicksQueue nobody drains (issue #30, item 2): before, the worker
    rejected an SQS batch as a bad kick, and the jobs waited for the daily reaper."""
    with JobStore.open(worker_env) as store:
        seed(store, 3, queue="mail")
        seed(store, 2, queue="reports")
    batch = {
        "Records": [
            sqs_record(on_failure_record(kick_event("mail", "enqueue"))),
            sqs_record(on_failure_record(kick_event("mail", "rekick", 3), "EventAgeExceeded")),
            dead_letter(kick_event("reports", "wake")),
        ]
    }
    capsys.readouterr()
    answer = load_handler("worker").handler(batch, FakeLambdaContext())
    assert answer == {"batchItemFailures": []}  # every record handled: SQS deletes them
    assert statuses(worker_env) == {"mail:done": 3, "reports:done": 2}
    blobs = emitted(capsys.readouterr().out)
    assert total(blobs, "succeeded") == 5 and total(blobs, "failed_kicks_drained") == 2
    assert sessions_of(worker_env) == 0


def test_malformed_records_are_dropped_and_a_failed_drain_is_handed_back(
    worker_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record that is not a kick is logged and deleted (a retry would fail the same way);
    a drain that cannot reach the database hands its records back (SQS redelivers them):
    the job is committed and must still run. A failed reaper run's record is dropped."""
    garbage = [
        sqs_record("not json"),
        sqs_record("[1, 2]"),
        sqs_record(json.dumps({"queue": "mail", "reason": "because"})),
        sqs_record(on_failure_record("a string payload")),
        sqs_record(on_failure_record({"source": "pgkick.reaper-schedule"})),
        dead_letter({"periodic": "no such/thing", "tick": TICK}),
    ]
    app = load_handler("worker")
    assert app.handler({"Records": garbage}, FakeLambdaContext()) == {"batchItemFailures": []}
    assert "rejected" in json.dumps(emitted(capsys.readouterr().out))
    monkeypatch.setattr(
        app.runtime, "dsn", lambda: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
    )
    kick = dead_letter(kick_event("mail", "wake"))
    answer = app.handler({"Records": [kick, garbage[0]]}, FakeLambdaContext())
    assert answer == {"batchItemFailures": [{"itemIdentifier": kick["messageId"]}]}


@pytest.mark.parametrize(
    "body",
    [
        "[" * 2000 + "]" * 2000,  # past the JSON parser's depth: RecursionError
        json.dumps({"periodic": "nightly", "tick": "0001-01-01T00:00:00+01:00"}),
        json.dumps({"periodic": "nightly", "tick": "9999-12-31T23:30:00-01:00"}),
    ],
    ids=["nested past the parser", "tick before year 1 in UTC", "tick after 9999 in UTC"],
)
def test_a_record_that_cannot_be_read_is_dropped_alone_not_with_its_batch(
    worker_env: str, body: str
) -> None:
    """Catches a record whose reading raised other than BadEvent (RecursionError,
    OverflowError, a review): the whole batch failed, and SQS handed its good kicks back
    with it every time, for the queue's retention; the jobs waited for the reaper."""
    with JobStore.open(worker_env) as store:
        seed(store, 2, queue="mail")
    batch = {"Records": [sqs_record(body), dead_letter(kick_event("mail", "wake"))]}
    answer = load_handler("worker").handler(batch, FakeLambdaContext())
    assert answer == {"batchItemFailures": []}
    assert statuses(worker_env) == {"mail:done": 2}


def test_a_ticks_drain_emits_the_job_counts_its_failures_included(
    worker_env: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches issue #30 defect 4: the tick path returned without emitting `failed`, so the
    failed-jobs alarm never saw a periodic job that failed for good. Also a tick that
    Scheduler dead-lettered runs from FailedKicksQueue, once."""
    (tmp_path / "jobs_tick_fail.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('rate(1 day)', task='always_fails', queue='ticks', max_attempts=1)\n"
        "def always_fails(payload):\n"
        "    raise RuntimeError('the report server is down')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PGKICK_TASKS", "jobs_tick_fail")
    try:
        app = load_handler("worker")
        capsys.readouterr()
        first = app.handler({"periodic": "always_fails", "tick": TICK}, FakeLambdaContext())
        blobs = emitted(capsys.readouterr().out)
        late = dead_letter({"periodic": "always_fails", "tick": "2026-12-02T03:00:00Z"})
        again = app.handler({"Records": [late]}, FakeLambdaContext())
        later = emitted(capsys.readouterr().out)
    finally:
        sys.modules.pop("jobs_tick_fail", None)
        periodic_registry.declared.pop("always_fails", None)
    assert first["failed"] == 1
    assert total(blobs, "failed") == 1 and total(blobs, "claimed") == 1
    assert again == {"batchItemFailures": []}
    assert total(later, "failed") == 1 and statuses(worker_env) == {"ticks:failed": 2}


def test_the_dev_stacks_dead_letters_are_what_the_worker_drains() -> None:
    """The local Scheduler's dead letter (pgkick_dev.devserver.scheduler_delivery), as the
    stack hands it to the worker, is the record this module's handler reads: catches the
    stand-in and the handler drifting apart (a dead letter the worker would drop as
    malformed locally, or one AWS's shape would not match)."""
    from pgkick.aws.failed_kicks import is_sqs_event, sort_records
    from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN, DeadLetter

    letters = [
        DeadLetter(LOCAL_DLQ_ARN, json.dumps(kick_event(queue, "wake")), {"ERROR_CODE": "x"})
        for queue in ("mail", "mail", "billing")
    ]
    event = {"Records": [letter.sqs_record() for letter in letters]}
    assert is_sqs_event(event)
    batch = sort_records(event["Records"])
    assert batch.dropped == 0
    assert {queue: len(ids) for queue, ids in batch.kicks.items()} == {"mail": 2, "billing": 1}
