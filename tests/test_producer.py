"""The producer: validation before writing, kicks only after commit, kick failures lose nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import boto3
import psycopg
import pytest

from pgkick.connections.db import server_clock
from pgkick.kick.kickers import kick_event
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.producer import enqueue as producer
from pgkick.producer.plan import job_specs
from pgkick.store.bulk import IDS_ONLY_FROM
from pgkick.store.producer import ProducerStore
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES
from tests.aws import WORKER, CallLog, create_worker_function
from tests.helpers import FakeClock, job_row
from tests.store import JobStore


class RecordingKicker:
    def __init__(self, fail: bool = False) -> None:
        self.kicks: list[tuple[str, str]] = []
        self.wakes: list[tuple[str, datetime]] = []
        self.fail = fail

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        kick_event(queue, reason, hop)  # a reason no worker accepts fails the test, as it
        if self.fail:  # would make a real kicker's event refused
            raise ConnectionError("Lambda endpoint unreachable")
        self.kicks.append((queue, reason))

    def wake_at(self, queue: str, when: datetime) -> None:
        self.wakes.append((queue, when))


def count_jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone()[0])  # type: ignore[index]


def test_enqueue_and_kick_commits_then_kicks_once(dsn: str) -> None:
    kicker = RecordingKicker()
    job_id = producer.enqueue_and_kick(
        {"to": "a@b.c"}, task="send_email", queue="mail", dsn=dsn, kicker=kicker
    )
    row = job_row(dsn, job_id)
    assert (row["status"], row["task"], row["queue"], row["payload"]) == (
        "queued",
        "send_email",
        "mail",
        {"to": "a@b.c"},
    )
    assert kicker.kicks == [("mail", "enqueue")] and kicker.wakes == []


class ReadsAdvance(FakeClock):
    """A clock one second further at every read: the enqueue's own time, made long."""

    def __call__(self) -> datetime:
        return self.advance(1)


def test_a_job_due_by_its_commit_but_not_when_planned_is_kicked(dsn: str) -> None:
    """Catches a job whose delay is shorter than the enqueue itself: not due when planned,
    so no kick was reserved with its insert, and due by the commit, so no wake-up either;
    kick_committed was told nothing needed reserving, and the job waited for a sweep or the
    daily reaper (a review: 1 in 40 at delay=0.001 s, every time behind a slow insert)."""
    clock = ReadsAdvance()
    kicker = RecordingKicker()
    due = clock.now + timedelta(seconds=1.5)  # after the plan's read, before the commit's
    producer.enqueue_and_kick({}, task="noop", queue="soon", run_at=due, dsn=dsn, kicker=kicker,
                              clock=clock)  # fmt: skip
    assert kicker.kicks == [("soon", "enqueue")] and kicker.wakes == []


def test_transaction_kicks_once_per_queue_after_commit(dsn: str) -> None:
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=kicker) as jobs:
            conn.execute("CREATE TABLE orders (id int)")
            conn.execute("INSERT INTO orders VALUES (42)")
            jobs.enqueue({"order": 42}, task="receipt", queue="mail")
            jobs.enqueue({"order": 42}, task="invoice", queue="mail")
            jobs.enqueue({"order": 42}, task="stock", queue="warehouse")
            assert kicker.kicks == []  # nothing before the commit
        assert kicker.kicks == [("mail", "enqueue"), ("warehouse", "enqueue")]
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)
    assert count_jobs(dsn) == 3


def test_rollback_never_kicks_and_leaves_no_job(dsn: str) -> None:
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:
        with pytest.raises(ZeroDivisionError), producer.transaction(conn, kicker=kicker) as jobs:
            jobs.enqueue({"order": 1}, task="receipt")
            raise ZeroDivisionError("the app's own error")
    assert kicker.kicks == [] and count_jobs(dsn) == 0


def test_transaction_refuses_a_connection_already_in_a_transaction(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT 1")  # psycopg has opened a transaction: pgkick would not own it
        with pytest.raises(RuntimeError, match="must own the transaction"):
            with producer.transaction(conn, kicker=RecordingKicker()):
                pass
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(RuntimeError, match="autocommit off"):
            with producer.transaction(conn, kicker=RecordingKicker()):
                pass


def test_failed_kick_does_not_raise_and_the_reapers_kick_runs_the_job(dsn: str) -> None:
    from pgkick.worker.reaper import reap

    before = producer.stats.kick_failures
    job_id = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=RecordingKicker(fail=True))
    assert producer.stats.kick_failures == before + 1
    assert job_row(dsn, job_id)["status"] == "queued"  # committed, safe
    backstop = RecordingKicker()
    with JobStore.open(dsn) as store:
        report = reap(store, backstop, retention=timedelta(days=7))
    assert report["kicked"] == ["default"] and backstop.kicks == [("default", "reaper")]


def test_enqueue_many_is_one_commit_and_kicks_once_per_queue(dsn: str) -> None:
    kicker = RecordingKicker()
    later = datetime.now(UTC) + timedelta(minutes=10)
    ids = producer.enqueue_many(
        [
            {"payload": {"n": n}, "task": "noop", "queue": "q1" if n % 2 else "q2"}
            for n in range(1_000)
        ]
        + [{"payload": {}, "task": "noop", "queue": "q3", "run_at": later}],
        dsn=dsn,
        kicker=kicker,
    )
    assert len(ids) == 1_001 and ids == sorted(ids)
    assert sorted(kicker.kicks) == [("q1", "enqueue"), ("q2", "enqueue")]
    assert [q for q, _ in kicker.wakes] == ["q3"]
    assert abs((kicker.wakes[0][1] - later).total_seconds()) < 1
    assert job_row(dsn, ids[7])["payload"] == {"n": 7}


class _ClockBehind(datetime):
    """This machine's clock 50 ms behind the server's (the producer reads datetime.now)."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime.now(tz) - timedelta(milliseconds=50)


@pytest.mark.parametrize("form", ["enqueue_many", "transaction"])
def test_a_job_due_at_once_is_kicked_by_a_producer_whose_clock_is_behind_the_servers(
    dsn: str, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its run_at is the server's now(); whether it is due was asked of this machine's
    clock, read after the commit. Catches: a clock a few ms behind the server's took the
    job for a later one, booked a wake-up (Scheduler's next minute) and sent no kick."""
    monkeypatch.setattr("pgkick.producer.plan.datetime", _ClockBehind)
    monkeypatch.setattr("pgkick.producer.after_commit.datetime", _ClockBehind)
    kicker = RecordingKicker()
    if form == "enqueue_many":
        producer.enqueue_many([{"payload": {}, "task": "noop", "queue": "skew"}], dsn=dsn,
                              kicker=kicker)  # fmt: skip
    else:
        with psycopg.connect(dsn) as conn, producer.transaction(conn, kicker=kicker) as jobs:
            jobs.enqueue({}, task="noop", queue="skew")
    assert kicker.kicks == [("skew", "enqueue")]


PLUS_FIVE = timezone(timedelta(hours=5))
LONG_DELAY = timedelta(microseconds=47_591_810_969_869_130)
MIXED_JOBS: list[dict[str, Any]] = [
    {"payload": 1, "task": "t"},
    {"payload": 2, "task": "t", "queue": "q2", "delay": 1.5},
    {"payload": 3, "task": "t", "delay": timedelta(microseconds=1)},
    {"payload": 4, "task": "t", "delay": 0.0000125},  # half a microsecond, as a float
    {"payload": 5, "task": "t", "run_at": datetime(2031, 1, 1, tzinfo=PLUS_FIVE)},
    # ~1,500 years: float seconds (as sent) cannot hold the microseconds, and make_interval
    # rounds them to ...136 (timedelta(seconds=) would say ...133, the delay is ...130)
    {"payload": 6, "task": "t", "delay": LONG_DELAY},
    {"payload": 7, "task": "t", "unique_key": "k"},
]


@pytest.mark.parametrize("clock", ["server", "injected"])
def test_enqueue_many_knows_each_jobs_queue_and_due_time_as_stored(dsn: str, clock: str) -> None:
    """Long chunks are answered by ids only (job_insert_many_ids); each job's queue and run_at
    are then worked out by the caller (bulk.rows_of), and must be what the row holds: the
    kicks and the wake-ups are decided on them. Chunks: the mixed jobs (a run_at and a delay
    each), jobs sharing one queue and delay (its one-value columns), a short one (rows)."""
    mixed = [*MIXED_JOBS, *[{"payload": 0, "task": "t"}] * IDS_ONLY_FROM]  # plain: enough
    alike = [{"payload": 8, "task": "t", "queue": "q3", "delay": 2}] * IDS_ONLY_FROM
    short = [{"payload": 9, "task": "t", "queue": "q4", "delay": 3}]
    specs = job_specs(list(enumerate([*mixed, *alike, *short])), DEFAULT_MAX_PAYLOAD_BYTES)
    chunks = [specs[: len(mixed)], specs[len(mixed) : -1], specs[-1:]]
    at = datetime(2026, 6, 1, 12, 0, 0, 123457, tzinfo=UTC)
    with ProducerStore.open(dsn, (lambda: at) if clock == "injected" else server_clock) as store:
        every, inserted = store.insert_many_unique(chunks)
    with psycopg.connect(dsn) as conn:
        stored = conn.execute("SELECT id, queue, run_at FROM pgkick.jobs ORDER BY id").fetchall()
    assert sorted(map(tuple, every)) == sorted(map(tuple, inserted)) == stored
    keyed = every.pop(6)  # inserted after the plain jobs, in a round of its own
    assert keyed.id == stored[-1][0] and [job.id for job in every] == [r[0] for r in stored[:-1]]
    assert stored[5][2] - stored[0][2] - LONG_DELAY == timedelta(microseconds=6)


def test_a_bad_job_in_a_later_chunk_rolls_back_the_chunks_already_sent(dsn: str) -> None:
    kicker = RecordingKicker()
    bad = producer.INSERT_CHUNK * 2 + 3  # two chunks are at the server when it is found
    jobs: list[dict[str, Any]] = [{"payload": n, "task": "noop"} for n in range(bad + 10)]
    jobs[bad] = {"payload": bad, "task": "noop", "delay": -1}
    with pytest.raises(ValueError, match=rf"jobs\[{bad}\]: delay: .*negative"):
        producer.enqueue_many(jobs, dsn=dsn, kicker=kicker)
    assert count_jobs(dsn) == 0 and kicker.kicks == []
    assert len(producer.enqueue_many(jobs[:bad], dsn=dsn, kicker=kicker)) == bad  # still usable


BAD_INPUT: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"payload": {1, 2}}, TypeError, "payload: Object of type set"),
    ({"payload": {"x": float("nan")}}, ValueError, "payload: .*NaN"),
    ({"payload": {"x": float("inf")}}, ValueError, "payload: .*Infinity"),
    ({"payload": {1: "int key"}}, TypeError, "payload: object keys must be strings"),
    ({"payload": {"a": [{"b": (2, {3: "deep"})}]}}, TypeError, "payload: object keys must be"),
    ({"payload": {"a": [1, {"b": float("nan")}]}}, ValueError, "payload: .*NaN"),
    ({"payload": "x" * (DEFAULT_MAX_PAYLOAD_BYTES + 1)}, ValueError, "payload: .*larger than"),
    ({"payload": "\ud800"}, ValueError, "payload: contains a lone surrogate"),
    ({"payload": "a\x00b"}, ValueError, "payload: contains a NUL"),
    ({"task": ""}, ValueError, "task: must not be empty"),
    ({"task": "t" * 129}, ValueError, "task: 129 characters"),
    ({"queue": "bad\nqueue"}, ValueError, "queue: .*control characters"),
    ({"queue": 7}, TypeError, "queue: must be a string"),
    ({"max_attempts": 0}, ValueError, r"max_attempts: 0 is outside 1\.\.1000"),
    ({"max_attempts": True}, TypeError, "max_attempts: must be an integer"),
    ({"run_at": datetime(2030, 1, 1)}, ValueError, "run_at: .*naive"),
    ({"delay": -5}, ValueError, "delay: .*negative"),
    ({"delay": 5, "run_at": datetime.now(UTC)}, ValueError, "run_at and delay"),
]


@pytest.mark.parametrize(("override", "error", "message"), BAD_INPUT)
def test_bad_input_is_refused_before_anything_is_written(
    dsn: str, override: dict[str, Any], error: type[Exception], message: str
) -> None:
    kicker = RecordingKicker()
    arguments: dict[str, Any] = {"payload": {"ok": True}, "task": "noop", **override}
    payload = arguments.pop("payload")
    with pytest.raises(error, match=message):
        producer.enqueue_and_kick(payload, dsn=dsn, kicker=kicker, **arguments)
    with pytest.raises(error, match=rf"jobs\[1\]: {message}"):
        producer.enqueue_many(
            [{"payload": 1, "task": "noop"}, {"payload": payload, **arguments}],
            dsn=dsn,
            kicker=kicker,
        )
    assert count_jobs(dsn) == 0 and kicker.kicks == []


def test_lambda_kicker_invokes_asynchronously_with_a_tiny_payload(dsn: str, aws: None) -> None:
    create_worker_function()
    log = CallLog()
    kicker = LambdaKicker(WORKER, lambda_client=log.attach(boto3.client("lambda")))
    producer.enqueue_and_kick({"big": "x" * 10_000}, task="noop", dsn=dsn, kicker=kicker)
    (invoke,) = log.named("Invoke")
    assert invoke["FunctionName"] == WORKER and invoke["InvocationType"] == "Event"
    assert log.kicks() == [{"queue": "default", "reason": "enqueue"}]
    assert len(invoke["Payload"]) < 100  # the kick never carries the job
    assert ("Invoke", 202) in log.statuses


def test_kick_to_a_missing_function_is_logged_and_the_job_kept(
    dsn: str, aws_full_lambda: None
) -> None:
    log = CallLog()
    kicker = LambdaKicker("no-such-function", lambda_client=log.attach(boto3.client("lambda")))
    before = producer.stats.kick_failures
    job_id = producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=kicker)
    assert ("Invoke", 404) in log.statuses
    assert producer.stats.kick_failures == before + 1
    assert job_row(dsn, job_id)["status"] == "queued"


@pytest.mark.parametrize("form", ["sync", "aio"])
def test_enqueue_many_cuts_its_statements_by_payload_size_too(
    dsn: str, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """Catches (a review, F2) a chunk's payloads sent in one statement whatever their size:
    5,000 jobs of 240,000-byte payloads (each under the limit) made a Bind message over
    PostgreSQL's 1 GB, and the server closed the connection. Here a budget of 1,000
    characters a statement: 12 plain jobs of 300 go in 4 statements (3 a statement), 6
    keyed ones in 2; every job is written, in input order, in one transaction."""
    import asyncio

    from pgkick import aio
    from pgkick.errors import UnknownParent
    from pgkick.store import bulk
    from tests.helpers import calls_between, statements_sent

    monkeypatch.setattr(bulk, "STATEMENT_PAYLOAD_CHARS", 1_000, raising=False)
    kinds = {
        "plain": ["-- job_insert_many:%", "-- job_insert_many_ids:%"],
        "keyed": ["-- job_insert_many_unique:%"],
    }
    jobs: list[dict[str, Any]] = [
        {"payload": f"{n:03}" + "x" * 295, "task": "t"} for n in range(12)
    ]
    jobs += [{**job, "unique_key": f"k{n}"} for n, job in enumerate(jobs[:6])]
    kicker = RecordingKicker()
    before = statements_sent(dsn, kinds)
    if form == "sync":
        ids = producer.enqueue_many(jobs, dsn=dsn, kicker=kicker)
    else:
        ids = asyncio.run(aio.enqueue_many(jobs, dsn=dsn, kicker=kicker))
    assert calls_between(before, statements_sent(dsn, kinds)) == {"plain": 4, "keyed": 2}
    with psycopg.connect(dsn) as conn:
        stored = conn.execute("SELECT id, payload #>> '{}' FROM pgkick.jobs").fetchall()
    payloads = dict(stored)
    assert len(stored) == 18 and [payloads[i][:3] for i in ids] == [
        f"{n:03}" for n in [*range(12), *range(6)]
    ]
    # refused by the server once every run is sent (an unknown parent): none of them stays
    bad = [*jobs[:12], {"payload": 0, "task": "t", "after": [2**62]}]
    with pytest.raises(UnknownParent):
        if form == "sync":
            producer.enqueue_many(bad, dsn=dsn, kicker=kicker)
        else:
            asyncio.run(aio.enqueue_many(bad, dsn=dsn, kicker=kicker))
    assert count_jobs(dsn) == 18


def test_a_job_option_beside_where_to_commit_is_refused_by_the_sync_forms_too(dsn: str) -> None:
    """The synchronous twins of tests/test_aio.py's: `pgkick.enqueue_many(jobs, priority=9)`
    and `Workflow.enqueue(queue=...)` wrote their jobs without the option, no word said."""
    import pgkick
    from pgkick.errors import InvalidArgumentType
    from pgkick.kick.kickers import NoKicker

    with pytest.raises(InvalidArgumentType, match=r"pgkick.enqueue_many: takes no priority="):
        producer.enqueue_many(
            [{"payload": {}, "task": "t"}],
            dsn=dsn,
            kicker=NoKicker(),
            **{"priority": 9},  # type: ignore[arg-type]
        )
    workflow = pgkick.Workflow()
    workflow.add("t", {})
    with pytest.raises(InvalidArgumentType, match=r"Workflow.enqueue: takes no queue="):
        workflow.enqueue(dsn=dsn, kicker=NoKicker(), **{"queue": "x"})  # type: ignore[arg-type]
    assert count_jobs(dsn) == 0
