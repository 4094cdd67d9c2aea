"""The worker loop, in process: outcomes, leases kept and lost, time budget, fan-out."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick.config import Settings
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.runtime import Runtime
from tests.helpers import FakeClock, job_row, seed
from tests.store import JobStore
from tests.test_producer import RecordingKicker

LEASE = timedelta(minutes=5)
OPTIONS = WorkerOptions(
    batch=10,
    lease=LEASE,
    min_remaining=timedelta(seconds=2),
    max_fanout=1,
    heartbeat=False,
    backoff_jitter=0.0,  # exact backoffs here; tests/test_jitter.py covers the spread
)


@pytest.fixture
def timed(dsn: str, clock: FakeClock) -> Iterator[JobStore]:
    with JobStore.open(dsn, clock) as opened:
        yield opened


def forever() -> int:
    return 600_000


def test_outcomes_done_retried_and_permanent(dsn: str, timed: JobStore, clock: FakeClock) -> None:
    tasks = Registry()
    tasks.task("ok")(lambda payload: None)

    @tasks.task("boom")
    def boom(payload: Any) -> None:
        raise RuntimeError("SMTP 451: try again later")

    ok, bad, unknown = (seed(timed, 1, task=name)[0] for name in ("ok", "boom", "nope"))
    kicker = RecordingKicker()
    summary = Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)

    # An unknown task is retried (a deploy may be mid-rollout), not failed at once: #27.
    assert (summary.claimed, summary.done, summary.retried, summary.failed) == (3, 1, 2, 0)
    assert summary.stopped_because == "empty"
    assert job_row(dsn, ok)["status"] == "done"
    retry = job_row(dsn, bad)
    assert retry["status"] == "queued"
    assert retry["last_error"] == "RuntimeError: SMTP 451: try again later"
    assert set(kicker.wakes) == {("default", clock.now + timedelta(seconds=20))}
    later = job_row(dsn, unknown)
    assert (later["status"], later["attempts"]) == ("queued", 1)
    assert later["last_error"].startswith("unknown task 'nope'; registered: boom, ok from")


def test_a_payload_too_deep_for_python_fails_only_its_own_job(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """Catches: a jsonb payload nested past Python's JSON decoder (valid for PostgreSQL,
    written by SQL or another producer) raising RecursionError while the claim's rows
    were read: the drain ended, every job of the claim left running, and again at each
    claim. Here: that job fails for good, saying why, its claim-mates (a batch task's
    too) done."""
    tasks = Registry()
    tasks.task("ok")(lambda payload: None)
    tasks.task("batched", batch=2)(lambda items: None)
    (deep,) = seed(timed, 1, task="ok")
    (deep_batched,) = seed(timed, 1, task="batched")
    others = seed(timed, 2, task="ok") + seed(timed, 1, task="batched")
    nested = "[" * 3000 + "]" * 3000
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgkick.jobs SET payload = %s::jsonb WHERE id = ANY(%s)",
            (nested, [deep, deep_batched]),
        )
    summary = Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", forever)

    assert (summary.claimed, summary.done, summary.failed) == (5, 3, 2)
    with psycopg.connect(dsn) as conn:
        rows = dict(
            conn.execute(
                "SELECT id, status || ': ' || last_error FROM pgkick.jobs WHERE id = ANY(%s)",
                ([deep, deep_batched],),
            ).fetchall()
        )
    for job_id in (deep, deep_batched):
        assert rows[job_id] == (
            "failed: payload unreadable: (jsonb of 6000 bytes, nested deeper than Python's "
            "JSON decoder reads); not run"
        )
    assert [job_row(dsn, i)["status"] for i in others] == ["done"] * 3


def test_a_task_raising_system_exit_fails_only_its_own_job(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """Catches: SystemExit (a library's sys.exit() inside a task) escaping the worker, as
    it did (a review, 2026-12-05, F2): the worker process ended, the batch's finished job
    was never recorded and every job of it stayed `running` until its lease ran out, the
    exiting job's own error never stored. Here: the exiting job is retried with its error,
    its batch-mates done, in one drain."""
    tasks = Registry()
    tasks.task("ok")(lambda payload: None)

    @tasks.task("exits")
    def exits(payload: Any) -> None:
        raise SystemExit(3)

    @tasks.task("batch_exits", batch=2)
    def batch_exits(items: list[Any]) -> None:
        raise SystemExit("a batch task's exit")

    first = seed(timed, 1, task="ok")
    (exiting,) = seed(timed, 1, task="exits")
    after = seed(timed, 2, task="ok")
    batched = seed(timed, 2, task="batch_exits")
    summary = Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", forever)

    assert (summary.claimed, summary.done, summary.retried, summary.failed) == (6, 3, 3, 0)
    assert [job_row(dsn, i)["status"] for i in first + after] == ["done"] * 3
    row = job_row(dsn, exiting)
    assert (row["status"], row["attempts"], row["last_error"]) == ("queued", 1, "SystemExit: 3")
    assert [job_row(dsn, i)["last_error"] for i in batched] == [
        "SystemExit: a batch task's exit"
    ] * 2


def test_no_transaction_is_open_while_a_job_runs(dsn: str, timed: JobStore) -> None:
    tasks = Registry()
    seen: list[tuple[Any, ...]] = []

    @tasks.task("inspect")
    def inspect(payload: Any) -> None:
        with psycopg.connect(dsn, autocommit=True) as other:
            seen.append(
                other.execute(
                    "SELECT state, backend_xid, backend_xmin FROM pg_stat_activity WHERE pid = %s",
                    (timed.conn.info.backend_pid,),
                ).fetchone()
                or ()
            )

    seed(timed, 2, task="inspect")
    Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", forever)
    assert seen == [("idle", None, None)] * 2


def test_long_job_extends_its_lease_and_keeps_the_job(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    tasks = Registry()
    reaped: list[int] = []

    @tasks.task("long")
    def long(payload: Any, job: JobContext) -> None:
        for _ in range(3):  # 3 x 0.9 leases: far longer than one lease
            clock.advance(LEASE.total_seconds() * 0.9)
            assert job.extend_lease() is True
            with JobStore.open(dsn, clock) as reaper:
                reaped.extend(r.id for r in reaper.reap_expired())

    (job_id,) = seed(timed, 1, task="long")
    summary = Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", forever)
    assert reaped == [] and summary.done == 1
    assert (job_row(dsn, job_id)["status"], job_row(dsn, job_id)["attempts"]) == ("done", 1)


def test_job_whose_lease_was_taken_over_is_abandoned_without_writes(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    tasks = Registry()
    snapshot: dict[str, Any] = {}

    @tasks.task("slow")
    def slow(payload: Any, job: JobContext) -> None:
        clock.advance(LEASE.total_seconds() + 1)  # the worker stalled past its lease
        with JobStore.open(dsn, clock) as other:
            assert [r.id for r in other.reap_expired()] == [job.id]
            (taken,) = other.claim("default", batch=1, lease=LEASE)
            assert taken.attempts == 2
        snapshot.update(job_row(dsn, job.id))
        assert job.extend_lease() is False  # the article's UPDATE 0: not ours any more
        assert job.lease_lost.is_set()
        raise RuntimeError("would record a failure if it still owned the job")

    (job_id,) = seed(timed, 1, task="slow")
    summary = Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", forever)
    assert (summary.lost, summary.done, summary.failed, summary.retried) == (1, 0, 0, 0)
    assert job_row(dsn, job_id) == snapshot  # the new owner's row, untouched


def test_short_time_budget_stops_early_and_the_rekick_finishes(dsn: str, timed: JobStore) -> None:
    """Each job costs 1 s of the invocation's remaining time; 2 s must stay in reserve."""
    remaining = {"ms": 25_000}
    tasks = Registry()

    @tasks.task("tick")
    def tick(payload: Any) -> None:
        remaining["ms"] -= 1_000

    seed(timed, 45, task="tick")
    kicker = RecordingKicker()
    settings = Settings.from_env({"PGKICK_KICKER": "none", "PGKICK_MAX_FANOUT": "0"})
    runtime = Runtime(settings, kicker, dsn=lambda: dsn, tasks=tasks)

    first = runtime.drain("default", lambda: remaining["ms"])
    assert first.stopped_because == "time" and first.rekicked
    assert first.done == 20  # two batches of 10 s; a third would not fit before the reserve
    assert kicker.kicks == [("default", "rekick")]

    remaining["ms"] = 900_000  # the follow-up invocation the re-kick asked for
    second = runtime.drain("default", lambda: remaining["ms"])
    assert (second.done, second.stopped_because) == (25, "empty")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT status, count(*) FROM pgkick.jobs GROUP BY 1").fetchall() == [
            ("done", 45)
        ]


def test_jobs_not_started_when_the_reserve_is_reached_are_given_back_and_handed_over(
    dsn: str, timed: JobStore
) -> None:
    """Each job costs 1.5 s of the invocation's 4.5 s; 2 s must stay in reserve. Catches: the
    batch running on past the reserve, as it did (a review, 2026-12-05, F3): every job of
    the claim started whatever the time left, Lambda's timeout killed the worker mid-batch,
    and the jobs it never started stayed `running`, an attempt used, until their lease ran
    out. Here the third job would start with 1.5 s left: it and the rest go back to the
    queue, their attempt not used, and the queue is handed over."""
    remaining = {"ms": 4_500}
    tasks = Registry()

    @tasks.task("slow")
    def slow(payload: Any) -> None:
        remaining["ms"] -= 1_500

    ids = seed(timed, 5, task="slow")
    kicker = RecordingKicker()
    summary = Worker(timed, tasks, kicker, OPTIONS).drain("default", lambda: remaining["ms"])
    assert (summary.claimed, summary.done, summary.stopped_because) == (5, 2, "time")
    rows = [job_row(dsn, i) for i in ids]
    assert [(r["status"], r["attempts"]) for r in rows] == [("done", 1)] * 2 + [("queued", 0)] * 3
    assert all(r["locked_until"] is None for r in rows)
    assert kicker.kicks == [("default", "rekick")]


def test_full_batch_fans_out_one_more_kick(timed: JobStore) -> None:
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    seed(timed, 35)
    kicker = RecordingKicker()
    summary = Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)
    assert summary.done == 35 and summary.fanouts == 1
    assert kicker.kicks == [("default", "fanout")]


def test_a_backlog_cleared_within_fanout_after_wakes_no_second_worker(timed: JobStore) -> None:
    """Catches a fan-out on the first full batch: a second invocation's cold start takes
    longer than this worker needs for the whole backlog, so it would connect for nothing."""
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    seed(timed, 35)
    kicker = RecordingKicker()
    options = OPTIONS._replace(fanout_after=timedelta(seconds=1))
    worker = Worker(timed, tasks, kicker, options)
    ticks = iter(range(1000))
    worker.monotonic = lambda: next(ticks) * 0.01  # 10 ms a look: 35 jobs take well under 1 s
    assert worker.drain("default", forever).fanouts == 0 and kicker.kicks == []
    seed(timed, 35)
    worker.monotonic = lambda: next(ticks) * 0.5  # a slow backlog: full batches past 1 s
    assert worker.drain("default", forever).fanouts == 1
    assert kicker.kicks == [("default", "fanout")]
