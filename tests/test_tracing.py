"""OpenTelemetry (pgkick[otel]): the enqueuer's trace context stored with the job, the
job's run a span that is its child, in another process; nothing without OpenTelemetry."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

import pgkick
import pgkick.aio
from pgkick.kick.kickers import NoKicker
from pgkick.store import worker as worker_store
from pgkick.store.groups import set_queue_limit
from pgkick.store.migration_scripts import MIGRATIONS
from pgkick.store.queries import ROLE_SETUP
from pgkick.tasks.registry import Registry
from pgkick.validation import JobSpec
from pgkick.worker.job_span import xray_context
from pgkick.worker.loop import Worker
from tests.helpers import FakeClock
from tests.store import JobStore
from tests.test_contrib_django import django_db  # noqa: F401 (a fixture)
from tests.test_worker import OPTIONS, forever

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Span

ROOT = Path(__file__).resolve().parent.parent


@cache
def _sdk() -> tuple[InMemorySpanExporter, Any]:
    """The SDK as an app configures it, once a process (OpenTelemetry sets its provider
    once), imported only when a test here asks: the other modules' tests run as an app
    without OpenTelemetry does, at least until these ran. Its sampler records only while
    a test of this module runs, so later modules' workers do not fill the exporter."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler, SamplingResult

    class Switch(Sampler):
        on = False

        def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
            return (ALWAYS_ON if self.on else ALWAYS_OFF).should_sample(*args, **kwargs)

        def get_description(self) -> str:
            return "tests.test_tracing.Switch"

    exporter, switch = InMemorySpanExporter(), Switch()
    provider = TracerProvider(sampler=switch)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter, switch


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's SDK, recording; its finished spans in memory."""
    exporter, switch = _sdk()
    exporter.clear()
    switch.on = True
    try:
        yield exporter
    finally:
        switch.on = False
        exporter.clear()


def traceparent(span: Span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def vendor_context() -> Context:
    """An incoming request's context with a tracestate (a vendor's entry), as a web
    framework's instrumentation extracts it: the request span inherits the state."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    remote = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "opaque-1")]),
    )
    return trace.set_span_in_context(NonRecordingSpan(remote))


def stored(dsn: str, ids: list[int]) -> list[tuple[str | None, str | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT traceparent, tracestate FROM pgkick.jobs WHERE id = ANY(%s) ORDER BY id",
            (ids,),
        ).fetchall()
    return [(row[0], row[1]) for row in rows]


def _joined(dsn: str, unique: bool) -> list[int]:
    with psycopg.connect(dsn) as conn:
        pending = pgkick.enqueue_in(conn, kicker=NoKicker())
        ids = [pending.enqueue({}, task="noop", unique_key="j" if unique else None)]
        conn.commit()
        pending.kick()
    return ids


def _in_transaction(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn, pgkick.transaction(conn, kicker=NoKicker()) as jobs:
        return [
            jobs.enqueue({}, task="noop"),
            *jobs.enqueue_many([{"payload": {}, "task": "noop"}]),
        ]


def _sqlalchemy(dsn: str) -> list[int]:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from pgkick.contrib import sqlalchemy as pgkick_sa

    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))
    try:
        with Session(engine) as session, session.begin():
            jobs = pgkick_sa.jobs(session, kicker=NoKicker())
            return [
                jobs.enqueue({}, task="noop"),
                *jobs.enqueue_many([{"payload": {}, "task": "noop"}]),
            ]
    finally:
        engine.dispose()


ENQUEUE_FORMS: dict[str, Callable[[str], list[int]]] = {
    "enqueue_and_kick": lambda dsn: [
        pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    ],
    "enqueue_and_kick unique": lambda dsn: [
        pgkick.enqueue_and_kick({}, task="noop", unique_key="k", dsn=dsn, kicker=NoKicker())
    ],
    "enqueue_many": lambda dsn: pgkick.enqueue_many(
        [{"payload": {"n": n}, "task": "noop"} for n in range(3)], dsn=dsn, kicker=NoKicker()
    ),
    "enqueue_many unique": lambda dsn: pgkick.enqueue_many(
        [{"payload": {}, "task": "noop", "unique_key": f"u{n}"} for n in range(3)]
        + [{"payload": {}, "task": "noop"}],
        dsn=dsn,
        kicker=NoKicker(),
    ),
    "transaction": _in_transaction,
    "enqueue_in": lambda dsn: _joined(dsn, unique=False),
    "enqueue_in unique": lambda dsn: _joined(dsn, unique=True),
    "sqlalchemy contrib": _sqlalchemy,
    "aio enqueue_and_kick": lambda dsn: [
        asyncio.run(pgkick.aio.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker()))
    ],
    "aio enqueue_many": lambda dsn: asyncio.run(
        pgkick.aio.enqueue_many(
            [{"payload": {}, "task": "noop", "unique_key": "a"}, {"payload": {}, "task": "noop"}],
            dsn=dsn,
            kicker=NoKicker(),
        )
    ),
}


@pytest.mark.parametrize("form", ENQUEUE_FORMS)
def test_every_enqueue_form_stores_the_enqueuers_trace_context(
    dsn: str, spans: InMemorySpanExporter, form: str
) -> None:
    """Catches a form that inserts without the trace context (its statement's parameters
    built elsewhere than the plan): each job's row holds its span's traceparent and the
    request's tracestate, in the columns, not in the payload."""
    from opentelemetry import trace

    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("POST /orders", context=vendor_context()) as request:
        ids = ENQUEUE_FORMS[form](dsn)
    assert ids and stored(dsn, ids) == [(traceparent(request), "vendor=opaque-1")] * len(ids)
    with psycopg.connect(dsn) as conn:
        payloads = conn.execute("SELECT payload::text FROM pgkick.jobs").fetchall()
    assert not [p for (p,) in payloads if "traceparent" in p]


def test_group_commit_keeps_each_callers_context(dsn: str, spans: InMemorySpanExporter) -> None:
    """Catches the context taken where the job is inserted: a group commit's leader inserts
    the other threads' jobs, and would give them its own span."""
    from opentelemetry import trace

    tracer = trace.get_tracer("app")
    start = threading.Barrier(8)
    made: dict[int, str] = {}

    def request(n: int) -> None:
        with tracer.start_as_current_span(f"request {n}") as span:
            start.wait()
            made[pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())] = (
                traceparent(span)
            )

    threads = [threading.Thread(target=request, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = sorted(made)
    assert [parent for parent, _ in stored(dsn, ids)] == [made[i] for i in ids]


def test_no_span_stores_no_traceparent(dsn: str, spans: InMemorySpanExporter) -> None:
    """OpenTelemetry loaded and configured, but nothing started a span: NULL, not a
    made-up context."""
    ids = [pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())]
    ids += pgkick.enqueue_many([{"payload": {}, "task": "noop"}], dsn=dsn, kicker=NoKicker())
    assert stored(dsn, ids) == [(None, None), (None, None)]


def _spec(queue: str, parent: str | None, group: str | None = None) -> JobSpec:
    return JobSpec(queue, "noop", "{}", None, timedelta(0), 5, group=group, traceparent=parent)


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "untraced"])
@pytest.mark.parametrize("path", ["plain", "grouped", "limited", "round trip"])
def test_the_claim_returns_the_trace_context_at_every_path(
    dsn: str, path: str, traced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a branch of job_claim (the unlocked one, the locked one for groups and
    limits) or job_complete_and_claim returning the jobs without their trace context or
    times (migration 0012); and the times sent to a worker that does not trace (OpenTelemetry
    not loaded), where nothing reads them."""
    monkeypatch.setattr(worker_store, "tracing_loaded", lambda: traced)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with JobStore.open(dsn) as store:
        if path == "limited":
            set_queue_limit(store, "default", 5)
        first = store.insert_many([[_spec("default", parent, "g" if path == "grouped" else None)]])
        if path == "round trip":
            store.insert_many([[_spec("default", None)]])
            (done,) = store.claim("default", batch=1, lease=timedelta(minutes=1))
            held, jobs = store.complete_many_and_claim(
                [done], "default", batch=5, lease=timedelta(minutes=1)
            )
            assert held == {first[0].id} and len(jobs) == 1 and jobs[0].traceparent is None
            store.insert_many([[_spec("default", parent)]])
            _, jobs = store.complete_many_and_claim(
                jobs, "default", batch=5, lease=timedelta(minutes=1)
            )
        else:
            jobs = store.claim("default", batch=5, lease=timedelta(minutes=1))
    (job,) = jobs
    assert (job.traceparent, job.tracestate) == (parent, None)
    if not traced:
        assert (job.enqueued_at, job.run_at, job.claimed_at) == (None, None, None)
        return
    assert job.enqueued_at is not None and job.run_at is not None and job.claimed_at is not None
    assert job.enqueued_at <= job.claimed_at


def test_a_failing_job_runs_in_an_error_span_under_its_request(
    dsn: str, spans: InMemorySpanExporter
) -> None:
    """The worker's own loop: the run's span is the request span's child, says what the job
    is and what became of it, and a task that raised leaves status ERROR and the exception."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode

    tasks = Registry()

    @tasks.task("charge")
    def charge(payload: Any) -> None:
        raise ValueError("card declined")

    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("POST /checkout") as request:
        retried = pgkick.enqueue_and_kick({}, task="charge", dsn=dsn, kicker=NoKicker())
        failed = pgkick.enqueue_and_kick(
            {}, task="charge", max_attempts=1, dsn=dsn, kicker=NoKicker()
        )
    with JobStore.open(dsn) as store:
        Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)
    runs = {int(s.attributes["messaging.message.id"]): s for s in _runs(spans)}  # type: ignore[arg-type,index]
    assert sorted(runs) == sorted([retried, failed])
    for job_id, outcome in ((retried, "retried"), (failed, "failed")):
        run = runs[job_id]
        assert run.parent is not None and run.parent.span_id == request.get_span_context().span_id
        assert run.context.trace_id == request.get_span_context().trace_id
        assert run.kind is SpanKind.CONSUMER and run.name == "process default"
        assert run.status.status_code is StatusCode.ERROR
        assert run.status.description and "card declined" in run.status.description
        assert [e.attributes["exception.type"] for e in run.events if e.name == "exception"] == [
            "ValueError"
        ]
        assert run.attributes is not None
        assert run.attributes["pgkick.job.outcome"] == outcome
        assert run.attributes["pgkick.job.task"] == "charge"
        assert run.attributes["pgkick.job.attempt"] == 1
        assert float(run.attributes["pgkick.job.wait_ms"]) >= 0  # type: ignore[arg-type]
        assert {"pgkick.job.enqueued_at", "pgkick.job.run_at", "pgkick.job.claimed_at"} <= set(
            run.attributes
        )


class Unprintable(Exception):
    """An exception whose str() raises (a bad __str__, a message built lazily)."""

    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def test_a_dependants_wait_is_measured_from_its_release_not_its_enqueue(
    dsn: str, spans: InMemorySpanExporter
) -> None:
    """A parent waits an hour in the queue and runs 10 minutes (the database's clock
    injected); its dependant, enqueued with it, is claimed by the round trip that completes
    the parent. Its wait_ms must be 0: it was due the moment its parent released it. Catches
    the wait measured from the dependant's due time, which is its enqueue time: 70 minutes of
    its parent's wait and run read as its own time in the queue."""
    clock = FakeClock(datetime.now(UTC))
    tasks = Registry()

    @tasks.task("parent")
    def parent_task(payload: Any) -> None:
        clock.advance(600)

    @tasks.task("child")
    def child_task(payload: Any) -> None:
        pass

    parent = pgkick.enqueue_and_kick({}, task="parent", dsn=dsn, kicker=NoKicker())
    child = pgkick.enqueue_and_kick({}, task="child", dsn=dsn, kicker=NoKicker(), after=[parent])
    clock.advance(3600)
    with JobStore.open(dsn, clock) as store:
        summary = Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)
    assert summary.done == 2
    waits = {
        int(s.attributes["messaging.message.id"]): float(s.attributes["pgkick.job.wait_ms"])  # type: ignore[arg-type,index]
        for s in _runs(spans)
    }
    assert waits[child] == 0.0  # claimed at its release, by the parent's completion
    assert 3_599_000 < waits[parent] <= 3_600_000  # its hour in the queue (less the enqueue)
    run = next(s for s in _runs(spans) if s.attributes["messaging.message.id"] == str(child))  # type: ignore[index]
    assert "pgkick.job.released_at" in run.attributes  # type: ignore[operator]


def test_an_exception_whose_str_raises_fails_only_its_job_in_a_span(
    dsn: str, spans: InMemorySpanExporter
) -> None:
    """Catches the span's record_exception calling str() unguarded: with the SDK loaded it
    raised out of run_task, ending the drain and leaving the batch running until its lease
    expired, where without OpenTelemetry describe_error fails only that job."""
    from opentelemetry.trace import StatusCode

    tasks = Registry()
    tasks.task("noop")(lambda payload: None)

    @tasks.task("unprintable")
    def unprintable(payload: Any) -> None:
        raise Unprintable

    bad = pgkick.enqueue_and_kick({}, task="unprintable", dsn=dsn, kicker=NoKicker())
    good = pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    with JobStore.open(dsn) as store:
        summary = Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)
    assert (summary.done, summary.retried) == (1, 1)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT last_error FROM pgkick.jobs WHERE id = %s", (bad,)).fetchone()
    assert row is not None
    (error,) = row
    assert error == "Unprintable: <str() of the exception raised RuntimeError>"
    runs = {int(s.attributes["messaging.message.id"]): s for s in _runs(spans)}  # type: ignore[arg-type,index]
    assert sorted(runs) == sorted([bad, good])
    run = runs[bad]
    assert run.status.status_code is StatusCode.ERROR and run.status.description == error
    (event,) = [e for e in run.events if e.name == "exception"]
    assert event.attributes is not None
    assert str(event.attributes["exception.type"]).endswith("Unprintable")
    assert event.attributes["exception.message"] == "<str() of the exception raised RuntimeError>"
    assert "raise Unprintable" in str(event.attributes["exception.stacktrace"])


def _runs(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name.startswith("process ")]


def test_one_trace_from_the_request_to_the_run_in_the_worker_process(
    dsn: str, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """The app's request span here, the worker's real handler in another process (traced
    as the Lambda layer does): its job span has the request span as parent, in the same
    trace, and links the invocation's span and X-Ray's segment."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER) as request:
        job_id = pgkick.enqueue_and_kick({"order": 7}, task="noop", dsn=dsn, kicker=NoKicker())
    (exported_request,) = spans.get_finished_spans()
    assert exported_request.name == "POST /orders"

    out = tmp_path / "worker-spans.jsonl"
    xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PGKICK_", "OTEL_"))},
        "DATABASE_URL": dsn,
        "PGKICK_KICKER": "none",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "_X_AMZN_TRACE_ID": xray,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.otel_worker_process", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (answer,) = [line for line in done.stdout.splitlines() if line.startswith("handler answered")]
    assert json.loads(answer.removeprefix("handler answered")).get("done") == 1, answer

    exported = [json.loads(line) for line in out.read_text().splitlines()]
    (run,) = [s for s in exported if s["name"] == "process default"]
    (invocation,) = [s for s in exported if s["name"] == "pgkick-worker invocation"]
    context = request.get_span_context()
    assert run["context"]["trace_id"] == f"0x{context.trace_id:032x}"
    assert run["parent_id"] == f"0x{context.span_id:016x}"
    assert run["attributes"]["messaging.message.id"] == str(job_id)
    assert run["attributes"]["pgkick.job.outcome"] == "succeeded"
    assert run["status"]["status_code"] == "UNSET"
    linked = {(link["context"]["trace_id"], link["context"]["span_id"]) for link in run["links"]}
    assert linked == {
        (invocation["context"]["trace_id"], invocation["context"]["span_id"]),
        ("0x5759e988bd862e3fe1be46a994272793", "0x53995c3f42cd8ad8"),
    }


def test_without_opentelemetry_nothing_imports_it_and_the_column_stays_null(dsn: str) -> None:
    """OpenTelemetry made unimportable (as where the extra is not installed): `import pgkick`,
    an enqueue and the worker's handler run, and nothing tries to import it."""
    code = (
        "import sys, json\n"
        "sys.modules['opentelemetry'] = None  # import opentelemetry now raises\n"
        "import pgkick\n"
        "job = pgkick.enqueue_and_kick({}, task='noop')\n"
        "import pgkick.aws.worker as app\n"
        "from pgkick_dev.local.context import FakeLambdaContext\n"
        "result = app.handler({'queue': 'default'}, FakeLambdaContext())\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print(json.dumps([job, result['done'], loaded]))\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PGKICK_", "OTEL_"))},
        "DATABASE_URL": dsn,
        "PGKICK_KICKER": "none",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    job, ran, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert (ran, loaded) == (1, ["opentelemetry"])  # only the blocked entry
    assert stored(dsn, [job]) == [(None, None)]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            (0x5759E988BD862E3FE1BE46A994272793, 0x53995C3F42CD8AD8, True),
        ),
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a:1",
            (0x5759E988BD862E3FE1BE46A994272793, 0x53995C3F42CD8AD8, False),
        ),
        ("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", None),  # no parent segment
        ("Root=1-5759e988-bd862e3fe1be46a99427279z;Parent=53995c3f42cd8ad8", None),
        ("", None),
    ],
)
def test_xray_header_becomes_a_link_context(
    header: str, expected: tuple[int, int, bool] | None
) -> None:
    context = xray_context(header)
    found = (
        None
        if context is None
        else (context.trace_id, context.span_id, context.trace_flags.sampled)
    )
    assert found == expected


def role_setup_before(version: int) -> str:
    """role_setup.sql less its paragraphs about objects of migrations after `version`."""
    kept = [
        block
        for block in ROLE_SETUP.split("\n\n")
        if not any(int(n) > version for n in re.findall(r"\(migration (\d{4})\)", block))
    ]
    return "\n\n".join(kept)


def test_the_upgrade_to_0012_keeps_the_claims_grants(empty_dsn: str) -> None:
    """Catches 0012 recreating the claim functions (a return shape cannot change in place)
    without their grants: an install from 0011 whose operator let another role claim and
    insert keeps that role working, and PUBLIC still may not claim."""
    claim = "pgkick.job_claim(text, int, interval, timestamptz)"
    other = f"ops_{uuid.uuid4().hex[:8]}"
    with JobStore.open(empty_dsn) as store, store.transaction():
        store.create_schema()
        store.set_migration_path("pgkick")
        store.create_migration_table()
        for version, name, script in MIGRATIONS:
            if version <= 11:
                store.apply_migration(version, name, script)
        # role_setup as it was before 0012: without the trace columns, nor the blocks that
        # grant on what later migrations made (each headed "(migration NNNN)")
        before_0012 = role_setup_before(12)
        store.execute(before_0012.replace(",\n              traceparent, tracestate", ""))  # type: ignore[arg-type]
        store.execute(f"CREATE ROLE {other}")  # type: ignore[arg-type]
        store.execute(f"GRANT USAGE ON SCHEMA pgkick TO {other}")  # type: ignore[arg-type]
        store.execute(f"GRANT EXECUTE ON FUNCTION {claim} TO {other}")  # type: ignore[arg-type]
        store.execute(f"GRANT SELECT, UPDATE ON pgkick.jobs, pgkick.queue_limits TO {other}")  # type: ignore[arg-type]
        store.execute(f"GRANT INSERT (queue, task, payload) ON pgkick.jobs TO {other}")  # type: ignore[arg-type]
    try:
        assert pgkick.migrate(empty_dsn)[0] == 12  # and any later ones
        with psycopg.connect(empty_dsn) as conn:
            may = conn.execute(
                "SELECT has_function_privilege(%(other)s, %(claim)s, 'EXECUTE'),"
                " has_column_privilege(%(other)s, 'pgkick.jobs', 'traceparent', 'INSERT'),"
                " has_function_privilege('pgkick_worker', %(claim)s, 'EXECUTE'),"
                " has_function_privilege('pgkick_producer', %(claim)s, 'EXECUTE')",
                {"other": other, "claim": claim},
            ).fetchone()
            assert may == (True, True, True, False)
            conn.execute(f"SET ROLE {other}")  # type: ignore[arg-type]
            conn.execute(
                "INSERT INTO pgkick.jobs (queue, task, payload, traceparent)"
                " VALUES ('default', 'noop', '{}', NULL)"
            )
            (claimed,) = conn.execute(
                "SELECT traceparent FROM pgkick.job_claim('default', 1, '1 minute', NULL)"
            ).fetchall()
            assert claimed == (None,)
            conn.rollback()
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {other}")  # type: ignore[arg-type]
            conn.execute(f"DROP ROLE {other}")  # type: ignore[arg-type]


def test_the_django_contrib_stores_the_trace_context(
    django_db: str,  # noqa: F811
    spans: InMemorySpanExporter,
) -> None:
    """Django's form (pgkick.contrib.django, in an atomic block, kicked on_commit) stores the
    span the view enqueued in, as every other form does."""
    from django.db import transaction
    from opentelemetry import trace

    from pgkick.contrib import django as pgkick_django

    with trace.get_tracer("app").start_as_current_span("POST /orders") as request:
        with transaction.atomic():
            jobs = pgkick_django.jobs(kicker=NoKicker())
            ids = [jobs.enqueue({}, task="noop")]
            ids += jobs.enqueue_many([{"payload": {}, "task": "noop"}])
    assert stored(django_db, ids) == [(traceparent(request), None)] * 2
