"""Debounce and throttle on enqueue (issue 33 item 3): one job per key's burst, through the
unique key, race-free under producers in other processes, refused when ill-formed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick import aio
from pgkick.cli.main import main
from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.tasks.registry import Registry
from tests.helpers import FakeClock
from tests.store import JobStore
from tests.test_producer import RecordingKicker

ROOT = Path(__file__).parent.parent
LEASE = timedelta(minutes=5)
PROCESSES, PER_PROCESS = 4, 250  # 1,000 enqueues


def jobs_with_key(dsn: str, key: str) -> list[tuple[int, str, Any, datetime]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT id, status, payload, run_at FROM pgkick.jobs WHERE unique_key = %s ORDER BY id",
            (key,),
        ).fetchall()


def burst(dsn: str, mode: str) -> list[list[int]]:
    """PROCESSES producer processes, started together, PER_PROCESS enqueues each: the ids
    each got back."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.burst_producer", dsn, mode, str(p), str(PER_PROCESS)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCESSES)
    ]
    for proc in procs:  # every interpreter is up and waiting: let them all go at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * PROCESSES
    return [[int(line) for line in out.split()] for out in outputs]


def test_a_burst_of_1000_enqueues_from_4_processes_is_one_job_run_once_with_the_last_payload(
    dsn: str,
) -> None:
    """Catches a debounce that keeps the first payload (a plain unique key would), writes a
    second job, or loses an update to a racing producer: after the burst there is one queued
    job, whose payload is one process's *last* enqueue (every process's enqueues are in
    order, so the last one committed overall is some process's last), and the worker's
    claim, once the quiet period has passed, runs it once."""
    ids = burst(dsn, "debounce")
    assert {job_id for per_process in ids for job_id in per_process} == {ids[0][0]}
    assert sum(map(len, ids)) == PROCESSES * PER_PROCESS
    ((job_id, status, payload, run_at),) = jobs_with_key(dsn, "burst")
    assert status == "queued"
    assert payload in [{"process": p, "n": PER_PROCESS - 1} for p in range(PROCESSES)]
    clock = FakeClock(datetime.now(UTC))
    with JobStore.open(dsn, clock) as store:
        assert store.claim("default", batch=10, lease=LEASE) == []  # still quiet: not due
        clock.now = run_at
        (job,) = store.claim("default", batch=10, lease=LEASE)
        assert (job.id, job.payload) == (job_id, payload)
        store.complete_many([job])
        clock.now = run_at + timedelta(hours=2)
        assert store.claim("default", batch=10, lease=LEASE) == []  # one run, not two


def test_a_burst_of_throttled_enqueues_from_4_processes_keeps_the_first(dsn: str) -> None:
    """Catches a throttle that lets a second job in under racing producers, or that keeps a
    later payload: one job, the payload of its process's first enqueue."""
    ids = burst(dsn, "throttle")
    assert {job_id for per_process in ids for job_id in per_process} == {ids[0][0]}
    ((_, status, payload, _),) = jobs_with_key(dsn, "burst")
    assert status == "queued" and payload["n"] == 0


def test_debounce_pushes_the_due_time_back_until_max_delay_and_books_each_wake_up(
    dsn: str,
) -> None:
    """Catches a debounce that does not move the due time, one that lets a constant stream
    postpone the job beyond max_delay after the burst's first enqueue, and a moved job whose
    new due time gets no wake-up (the one booked for the old time would find nothing)."""
    clock, kicker = FakeClock(), RecordingKicker()
    t0 = clock.now

    def enqueue(n: int) -> int:
        return producer.enqueue_and_kick(
            {"n": n}, task="t", unique_key="k", debounce=10, max_delay=30,
            dsn=dsn, kicker=kicker, clock=clock,
        )  # fmt: skip

    first = enqueue(0)
    for n, at in enumerate((8, 16, 24), start=1):
        clock.now = t0 + timedelta(seconds=at)
        assert enqueue(n) == first
    ((_, _, payload, run_at),) = jobs_with_key(dsn, "k")
    assert payload == {"n": 3}
    assert run_at == t0 + timedelta(seconds=30)  # not 34: capped at max_delay
    assert kicker.kicks == []
    assert [when - t0 for _, when in kicker.wakes] == [
        timedelta(seconds=s) for s in (10, 18, 26, 30)
    ]


def test_throttle_keeps_the_first_for_the_period_even_once_it_finished(
    dsn: str, store: JobStore
) -> None:
    """Catches a throttle that only looks at live jobs (the unique index's view): a job done
    within the period must still hold the key; past the period the key is free."""
    clock = FakeClock(datetime.now(UTC))

    def enqueue(n: int) -> int:
        return producer.enqueue_and_kick(
            {"n": n}, task="t", unique_key="k", throttle=60, dsn=dsn, kicker=NoKicker(),
            clock=clock,
        )  # fmt: skip

    first = enqueue(1)
    assert enqueue(2) == first
    (job,) = store.claim("default", batch=10, lease=LEASE)
    store.complete_many([job])
    clock.advance(59)
    assert enqueue(3) == first
    clock.advance(2)
    second = enqueue(4)
    assert second != first
    assert [(p["n"], s) for _, s, p, _ in jobs_with_key(dsn, "k")] == [(1, "done"), (4, "queued")]


def test_a_flow_enqueue_in_the_apps_transaction_is_timed_by_the_enqueue_not_its_start(
    dsn: str,
) -> None:
    """Catches job_insert_flow timing a job by its transaction's start (now()): an app that
    enqueued inside its own transaction some time after it began recorded the job as made
    that long before, so a throttle admitted a second job right after the first committed
    (a review: 0.23 s after, under a 5 s throttle, behind a 6 s transaction) and a debounced
    job fell due at its commit, before the burst was quiet. Time passes between the
    transaction's first statement and the enqueue (a clock read, no sleep): the throttled
    job's created_at and the debounced job's due time must count from after that read."""
    with psycopg.connect(dsn) as conn, producer.transaction(conn, kicker=NoKicker()) as jobs:
        started, before = conn.execute("SELECT now(), clock_timestamp()").fetchone()  # type: ignore[misc]
        throttled = jobs.enqueue({"n": 1}, task="t", unique_key="thr", throttle=5)
        debounced = jobs.enqueue({"n": 1}, task="t", unique_key="deb", debounce=5)
    assert started < before
    with psycopg.connect(dsn) as conn:
        rows = {
            job_id: times
            for job_id, *times in conn.execute(
                "SELECT id, created_at, run_at FROM pgkick.jobs WHERE id = ANY(%s)",
                ([throttled, debounced],),
            ).fetchall()
        }
    assert rows[throttled][0] >= before  # what a throttle compares
    assert rows[debounced][1] >= before + timedelta(seconds=5)  # quiet for 5 s from here


def test_every_form_debounces_and_a_batch_ends_with_its_last_payload(dsn: str) -> None:
    """Catches a form that ignores debounce (inserting, or keeping the first payload):
    enqueue_many (a key repeated in the batch), the asyncio forms, pgkick.transaction and a
    typed task handle."""
    many = [{"payload": {"n": n}, "task": "t", "unique_key": "m", "debounce": 5} for n in range(5)]
    ids = producer.enqueue_many(many, dsn=dsn, kicker=NoKicker())
    assert len(set(ids)) == 1
    assert [p for _, _, p, _ in jobs_with_key(dsn, "m")] == [{"n": 4}]

    async def both() -> list[int]:
        return [
            await aio.enqueue_and_kick(
                {"n": 1}, task="t", unique_key="a", debounce=5, dsn=dsn, kicker=NoKicker()
            ),
            *await aio.enqueue_many(
                [{"payload": {"n": 2}, "task": "t", "unique_key": "a", "debounce": 5}],
                dsn=dsn,
                kicker=NoKicker(),
            ),
        ]

    first, again = asyncio.run(both())
    assert first == again and [p for _, _, p, _ in jobs_with_key(dsn, "a")] == [{"n": 2}]

    with psycopg.connect(dsn) as conn, producer.transaction(conn, kicker=NoKicker()) as jobs:
        jobs.enqueue({"n": 1}, task="t", unique_key="x", debounce=5)
        jobs.enqueue({"n": 2}, task="t", unique_key="x", debounce=5)

    @Registry().task("flow_handle_task")
    def handle_task(payload: dict[str, int]) -> None:
        return None

    assert [p for _, _, p, _ in jobs_with_key(dsn, "x")] == [{"n": 2}]
    for n in (3, 4):
        handle_task.enqueue_and_kick(
            {"n": n}, unique_key="h", debounce=5, dsn=dsn, kicker=NoKicker()
        )
    assert [p for _, _, p, _ in jobs_with_key(dsn, "h")] == [{"n": 4}]
    # another task's debounce of a held key is answered by the holder, untouched (0026)
    handle_task.enqueue_and_kick({"n": 5}, unique_key="x", debounce=5, dsn=dsn, kicker=NoKicker())
    assert [p for _, _, p, _ in jobs_with_key(dsn, "x")] == [{"n": 2}]


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        ({"debounce": 5, "throttle": 5}, InvalidArgument, "one or the other"),
        ({"debounce": 5}, InvalidArgument, "needs a unique_key"),
        ({"throttle": 5}, InvalidArgument, "needs a unique_key"),
        ({"debounce": 0, "unique_key": "k"}, InvalidArgument, "outside"),
        ({"throttle": -1, "unique_key": "k"}, InvalidArgument, "outside"),
        ({"debounce": 10**9, "unique_key": "k"}, InvalidArgument, "at most 30 days"),
        ({"throttle": timedelta(days=31), "unique_key": "k"}, InvalidArgument, "outside"),
        ({"debounce": float("nan"), "unique_key": "k"}, InvalidArgument, "not a number"),
        ({"debounce": "5", "unique_key": "k"}, InvalidArgumentType, "seconds or a timedelta"),
        ({"debounce": True, "unique_key": "k"}, InvalidArgumentType, "seconds or a timedelta"),
        ({"max_delay": 5, "unique_key": "k"}, InvalidArgument, "pass debounce"),
        ({"debounce": 10, "max_delay": 5, "unique_key": "k"}, InvalidArgument, "at least"),
        ({"debounce": 5, "delay": 1, "unique_key": "k"}, InvalidArgument, "drop one"),
        ({"debounce": 5, "unique_key": "k", "rate_key": "r"}, InvalidArgument, "rate_key="),
        ({"throttle": 5, "unique_key": "k", "after": [1]}, InvalidArgument, "after="),
    ],
)
def test_bad_flow_options_are_refused_before_anything_is_written(
    dsn: str, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    """Catches an ill-formed debounce or throttle reaching the database, by either form."""
    with pytest.raises(error, match=says):
        producer.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker(), **options)
    with pytest.raises(error, match=says):
        producer.enqueue_many([{"payload": {}, "task": "t", **options}], dsn=dsn, kicker=NoKicker())
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


def test_pgkick_enqueue_debounces_and_refuses_a_bad_period(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `pgkick enqueue` dropping --debounce (a second job would be a duplicate
    holding the first payload) or writing a job with a refused period."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)
    argv = ["enqueue", "noop", "--unique-key", "c", "--debounce", "5", "--dsn", dsn, "--json"]
    assert main([*argv, "--payload", '{"n": 1}']) == 0
    assert main([*argv, "--payload", '{"n": 2}']) == 0
    assert [p for _, _, p, _ in jobs_with_key(dsn, "c")] == [{"n": 2}]
    capsys.readouterr()
    assert main(["enqueue", "noop", "--unique-key", "d", "--throttle", "0", "--dsn", dsn]) == 2
    assert "throttle: 0 seconds is outside (0, 2592000]" in capsys.readouterr().err
    assert jobs_with_key(dsn, "d") == []
