"""The Lambda handlers, called as Lambda calls them: event files, a fake context, real Postgres."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import psycopg
import pytest

from pgkick import cli
from pgkick.kick.kickers import WAKE_MARGIN
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.local.context import FakeLambdaContext
from tests.aws import WORKER, CallLog, create_worker_function
from tests.helpers import event, job_row, load_handler, seed, sessions_of
from tests.store import JobStore


@pytest.fixture
def worker_env(dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    return dsn


def counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM pgkick.jobs GROUP BY 1").fetchall())


def test_worker_handler_drains_1000_jobs_and_leaves_no_session(worker_env: str) -> None:
    with JobStore.open(worker_env) as store:
        seed(store, 1_000)
    app = load_handler("worker")
    result = app.handler(event("kick"), FakeLambdaContext())
    assert result["claimed"] == 1_000 and result["done"] == 1_000
    assert result["stopped_because"] == "empty"
    assert counts(worker_env) == {"done": 1_000}
    assert sessions_of(worker_env) == 0  # the connection was closed before returning


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({}, "lacks 'queue'"),
        ("default", "must be a JSON object"),
        ({"queue": ""}, "queue: must not be empty"),
        ({"queue": "default", "job": {"id": 1}}, "unknown fields"),
        ({"queue": "default", "reason": "because"}, "reason 'because' is not one of"),
    ],
)
def test_bad_kick_events_are_rejected_clearly(worker_env: str, bad: Any, reason: str) -> None:
    with JobStore.open(worker_env) as store:
        seed(store, 3)
    result = load_handler("worker").handler(bad, FakeLambdaContext())
    assert reason in result["rejected"]
    assert counts(worker_env) == {"queued": 3}  # nothing claimed


def test_reaper_handler_requeues_an_expired_lease_and_kicks(
    worker_env: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_worker_function()
    log = CallLog()
    log.attach_default_session()
    monkeypatch.setenv("PGKICK_KICKER", "lambda")
    monkeypatch.setenv("PGKICK_WORKER_FUNCTION", WORKER)
    with JobStore.open(worker_env) as store:
        (job_id,) = seed(store, 1)
        store.claim("default", batch=1, lease=timedelta(seconds=1))
        store.conn.execute("UPDATE pgkick.jobs SET locked_until = now() - interval '1 second'")
    report = load_handler("reaper").handler(event("reaper"), FakeLambdaContext())
    assert (report["requeued"], report["failed"], report["kicked"]) == (1, 0, ["default"])
    assert report["queues"][0]["ready"] == 1 and "n_dead_tup" in report["table"]
    assert job_row(worker_env, job_id)["status"] == "queued"
    assert log.kicks() == [{"queue": "default", "reason": "reaper"}]
    assert sessions_of(worker_env) == 0


AT = re.compile(r"^at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\)$")


def test_retry_books_a_wake_up_schedule_for_the_right_minute(
    worker_env: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = create_worker_function()
    role = "arn:aws:iam::123456789012:role/pgkick-scheduler"
    log = CallLog()
    log.attach_default_session()
    for name, value in {
        "PGKICK_KICKER": "lambda",
        "PGKICK_WORKER_FUNCTION": WORKER,
        "PGKICK_WORKER_ARN": arn,
        "PGKICK_SCHEDULER_ROLE_ARN": role,
    }.items():
        monkeypatch.setenv(name, value)
    with JobStore.open(worker_env) as store:
        (job_id,) = seed(store, 1, task="flaky", payload='{"fail_times": 1}')
    before = datetime.now(UTC)
    result = load_handler("worker").handler(event("kick"), FakeLambdaContext())
    assert result["retried"] == 1
    run_at = job_row(worker_env, job_id)["run_at"]
    assert isinstance(run_at, datetime)

    # its rescue schedule (pgkick.worker.rescue) was made and deleted; the retry's wake-up stays
    (schedule,) = [s for s in log.named("CreateSchedule") if "rescue" not in s["Name"]]
    assert AT.match(schedule["ScheduleExpression"]), schedule["ScheduleExpression"]
    fires = datetime.strptime(schedule["ScheduleExpression"], "at(%Y-%m-%dT%H:%M:%S)")
    fires = fires.replace(tzinfo=UTC)
    # never early, and never less than a margin ahead (an at() in the past is refused, then
    # booked a minute further: tests/test_wake_bookings.py), within the minute after that
    earliest = max(run_at, before + WAKE_MARGIN)
    latest = max(run_at, datetime.now(UTC) + WAKE_MARGIN) + timedelta(minutes=1)
    assert earliest <= fires < latest
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == arn and schedule["Target"]["RoleArn"] == role
    assert json.loads(schedule["Target"]["Input"]) == {"queue": "default", "reason": "wake"}
    listed = boto3.client("scheduler").list_schedules()["Schedules"]
    assert [s["Name"] for s in listed] == [schedule["Name"]]


def test_delayed_jobs_share_one_schedule_per_queue_and_minute(dsn: str, aws: None) -> None:
    arn = create_worker_function()
    log = CallLog()
    kicker = LambdaKicker(
        WORKER,
        function_arn=arn,
        scheduler_role_arn="arn:aws:iam::1:role/r",
        scheduler_client=log.attach(boto3.client("scheduler")),
    )
    base = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=30)
    for seconds in (5, 20, 50, 65):  # three in one minute, one in the next
        producer.enqueue_and_kick(
            {}, task="noop", run_at=base + timedelta(seconds=seconds), dsn=dsn, kicker=kicker
        )
    assert kicker.flush(5)  # booked off the commit path (pgkick.kick.bookings)
    expressions = [s["ScheduleExpression"] for s in log.named("CreateSchedule")]
    assert expressions == [
        f"at({base + timedelta(minutes=1):%Y-%m-%dT%H:%M:%S})",
        f"at({base + timedelta(minutes=2):%Y-%m-%dT%H:%M:%S})",
    ]
    again = LambdaKicker(
        WORKER,
        function_arn=arn,
        scheduler_role_arn="arn:aws:iam::1:role/r",
        scheduler_client=boto3.client("scheduler"),
    )
    again.wake_at("default", base + timedelta(seconds=5))  # another process: name conflict, fine
    again.flush(5)
    assert len(boto3.client("scheduler").list_schedules()["Schedules"]) == 2


def test_dsn_from_a_secrets_manager_secret_is_used_and_never_logged(
    dsn: str,
    aws: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    role, password = f"app_{uuid.uuid4().hex[:8]}", f"s3cret-{uuid.uuid4().hex}"
    with psycopg.connect(dsn, autocommit=True) as admin:  # a role whose password is distinctive
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f"GRANT USAGE ON SCHEMA pgkick TO {role}")
        admin.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE"
            " ON pgkick.jobs, pgkick.pgkick_migrations, pgkick.queue_watchers,"
            " pgkick.queue_limits, pgkick.job_dependencies"  # (status: a release's time)
            f" TO {role}"
        )
    info.update(user=role, password=password)
    secret = boto3.client("secretsmanager").create_secret(
        Name="pgkick/db",
        SecretString=json.dumps(
            {
                "username": info["user"],
                "password": info["password"],
                "host": info["host"],
                "port": int(str(info["port"])),
                "dbname": info["dbname"],
            }
        ),
    )
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", secret["ARN"])
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    with JobStore.open(dsn) as store:
        seed(store, 5)
    result = load_handler("worker").handler(event("kick"), FakeLambdaContext())
    assert result["done"] == 5
    output = capsys.readouterr()
    logged = [json.dumps(record.__dict__, default=str) for record in caplog.records]
    assert any("drained" in line for line in logged)  # the handler did log, with its extras
    assert password not in output.out + output.err + "".join(logged)
    # the operator's command reads the same secret when DATABASE_URL is unset
    assert cli.main(["status", "--json"]) == 0
    output = capsys.readouterr()
    assert json.loads(output.out)["queues"] is not None and password not in output.out + output.err
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE {role}")


def test_a_cold_worker_imports_boto3_only_when_it_kicks_through_lambda(dsn: str) -> None:
    """boto3 costs ~0.3 s of CPU at every cold start; a worker with a local or no kicker,
    or a Lambda worker that has not kicked yet, must not pay it."""
    import subprocess
    import sys
    from pathlib import Path

    functions = Path(__file__).resolve().parent.parent / "functions"
    probe = "import sys, pgkick.aws.worker; print('boto3' in sys.modules)"
    for kicker, function in (("none", ""), ("lambda", "pgkick-worker")):
        env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": dsn, "PGKICK_KICKER": kicker}
        env |= {"PGKICK_WORKER_FUNCTION": function} if function else {}
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=functions,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-1000:]
        assert done.stdout.strip() == "False", kicker


def lambda_marshal(result: Any) -> Any:
    """The handler's answer as Lambda's runtime client sends it back (awslambdaric's own
    marshaller: a value it cannot encode is Runtime.MarshalError on AWS), parsed again."""
    from awslambdaric.lambda_runtime_marshaller import LambdaMarshaller

    text, content_type = LambdaMarshaller().marshal_response(result)
    assert content_type == "application/json"
    return json.loads(text)


def test_both_handlers_answers_survive_the_lambda_runtime_marshaller(worker_env: str) -> None:
    """Catches a handler answer Lambda cannot send: the reaper's report carried datetimes
    (next_lease_expiry with a job running, last_vacuum once the table was vacuumed) and
    awslambdaric failed every such run with Runtime.MarshalError (json.dumps(default=str)
    hid it). Both answers must come back equal through the runtime's own marshaller."""
    with JobStore.open(worker_env) as store:
        seed(store, 3)
        seed(store, 2, queue="other")
        store.claim("other", batch=1, lease=timedelta(minutes=5))  # a running job
        store.conn.execute("VACUUM pgkick.jobs")  # last_vacuum is set
        store.conn.execute("SELECT pg_stat_force_next_flush()")
    report = load_handler("reaper").handler(event("reaper"), FakeLambdaContext())
    running = next(q for q in report["queues"] if q["queue"] == "other")
    assert running["next_lease_expiry"] is not None and report["table"]["last_vacuum"]
    assert lambda_marshal(report) == report
    summary = load_handler("worker").handler(event("kick"), FakeLambdaContext())
    assert summary["done"] == 3
    assert lambda_marshal(summary) == summary


def test_a_kick_with_an_odd_reason_is_answered_short_not_raised(
    worker_env: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Catches `reason` checked by hashing it (a list raised TypeError out of the handler,
    so Lambda retried it) and a 20 MB reason echoed whole into the rejection and the log."""
    with JobStore.open(worker_env) as store:
        seed(store, 2)
    app = load_handler("worker")
    for reason in (["enqueue"], {"a": 1}, 5, "x" * 20_000_000):
        caplog.clear()
        result = app.handler({"queue": "default", "reason": reason}, FakeLambdaContext())
        assert "reason" in result["rejected"] and len(result["rejected"]) < 300
        assert all(len(record.getMessage()) < 300 for record in caplog.records)
        assert all(len(json.dumps(r.__dict__, default=str)) < 5_000 for r in caplog.records)
    assert counts(worker_env) == {"queued": 2}
