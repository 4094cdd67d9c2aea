"""Nothing raises after a commit, and nothing a commit promised is left undone: kicker
settings fail before the insert, a job due within the second gets its wake-up, an odd
exception fails only its own job, and a worker leaves no session its tasks opened."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
import pytest

from pgkick import config
from pgkick.errors import ConfigError
from pgkick.kick import default as kickers
from pgkick.kick.kickers import NoKicker, kick_event
from pgkick.producer import after_commit
from pgkick.producer import enqueue as producer
from pgkick.store.producer import QueuedJob
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.runtime import Runtime
from tests.helpers import sessions_of
from tests.store import JobStore


def count_jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone()
    return int(row[0]) if row else 0


def _transaction(dsn: str) -> None:
    with psycopg.connect(dsn) as conn, producer.transaction(conn) as jobs:
        jobs.enqueue({}, task="noop")


PRODUCER_FORMS: dict[str, Callable[[str], object]] = {
    "enqueue_and_kick": lambda dsn: producer.enqueue_and_kick({}, task="noop", dsn=dsn),
    "enqueue_many": lambda dsn: producer.enqueue_many([{"payload": {}, "task": "noop"}], dsn=dsn),
    "transaction": _transaction,
}


@pytest.mark.parametrize("form", sorted(PRODUCER_FORMS))
@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"PGKICK_KICKER": "bogus"}, "PGKICK_KICKER"),
        ({"PGKICK_KICKER": "lambda"}, "PGKICK_WORKER_FUNCTION"),
        ({"PGKICK_LOCAL_CONCURRENCY": "0"}, "PGKICK_LOCAL_CONCURRENCY"),
    ],
)
def test_a_bad_kicker_setting_fails_before_anything_is_written(
    dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    setting: dict[str, str],
    named: str,
) -> None:
    """Catches: the kicker built after the commit, so a retrying caller duplicates the job."""
    monkeypatch.setattr(kickers, "_default", None)  # as a fresh process: nothing built yet
    monkeypatch.delenv("PGKICK_WORKER_FUNCTION", raising=False)
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=named):
        PRODUCER_FORMS[form](dsn)
    assert count_jobs(dsn) == 0


class RecordingKicker:
    def __init__(self) -> None:
        self.kicks: list[str] = []
        self.wakes: list[datetime] = []

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        kick_event(queue, reason, hop)  # a reason no worker accepts fails the test
        self.kicks.append(queue)

    def wake_at(self, queue: str, when: datetime) -> None:
        self.wakes.append(when)


@pytest.mark.parametrize("delay", [0.3, 0.7, 1.0])
def test_a_job_due_within_the_second_gets_a_wake_up_at_its_run_at(dsn: str, delay: float) -> None:
    """Catches the old 1-second slack: such a job was kicked at once, the worker found it
    not ready, and nothing woke it again before the reaper (hourly)."""
    kicker = RecordingKicker()
    job_id = producer.enqueue_and_kick({}, task="noop", delay=delay, dsn=dsn, kicker=kicker)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT run_at FROM pgkick.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    assert kicker.kicks == [] and kicker.wakes == [row[0]]


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _raiser(exc: BaseException) -> Callable[[Any, Any], None]:
    def task(payload: Any, job: Any) -> None:
        raise exc

    return task


@pytest.mark.parametrize(
    ("exc", "stored"),
    [
        (ValueError("nul \x00 byte"), "ValueError: nul \\x00 byte"),
        (ValueError("lone \ud800 surrogate"), "ValueError: lone \\ud800 surrogate"),
        (_Unprintable(), "_Unprintable: <str() of the exception raised RuntimeError>"),
    ],
)
def test_an_odd_exception_fails_its_own_job_and_spares_its_batch_mate(
    dsn: str, exc: BaseException, stored: str
) -> None:
    """Catches: an exception text PostgreSQL refuses (NUL, lone surrogate) or a __str__ that
    raises crashing the worker, so the job ended 'lease expired' and its batch-mate re-ran."""
    registry = Registry()
    registry.task("odd")(_raiser(exc))
    ran: list[int] = []
    registry.task("mate")(lambda payload, job: ran.append(job.id))
    with JobStore.open(dsn) as store:
        odd = producer.Enqueuer(store).enqueue({}, task="odd", max_attempts=1)
        mate = producer.Enqueuer(store).enqueue({}, task="mate")
        summary = Worker(store, registry, NoKicker(), WorkerOptions(heartbeat=False)).drain(
            "default", lambda: 60_000
        )
        rows = dict(store.rows("SELECT id, last_error FROM pgkick.jobs WHERE status = 'failed'"))
        done = [r[0] for r in store.rows("SELECT id FROM pgkick.jobs WHERE status = 'done'")]
    assert (summary.failed, summary.done) == (1, 1)
    assert rows == {odd: stored} and done == [mate] and ran == [mate]


def test_a_worker_leaves_no_session_its_tasks_opened(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches: a task's follow-up enqueue leaving the producer's lingering connection open
    when the handler returns, so a frozen Lambda environment holds a session."""
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "60000")  # it would outlive the invocation
    registry = Registry()
    registry.task("follow_up")(
        lambda payload, job: producer.enqueue_and_kick(
            {}, task="noop", queue="later", dsn=dsn, kicker=NoKicker()
        )
    )
    settings = config.Settings.from_env({"PGKICK_KICKER": "none"})
    worker_runtime = Runtime(settings, NoKicker(), dsn=lambda: dsn, tasks=registry)
    producer.enqueue_and_kick({}, task="follow_up", dsn=dsn, kicker=NoKicker())
    producer.linger.close_all()  # the test's own enqueue is not the worker's
    summary = worker_runtime.drain("default", lambda: 60_000)
    assert summary.done == 1 and count_jobs(dsn) == 2
    assert sessions_of(dsn, "pgkick-producer") == 0 and sessions_of(dsn) == 0


def test_a_kick_check_that_fails_after_the_commit_does_not_raise(dsn: str) -> None:
    """Catches the reservation (sent after COMMIT in the same pipeline) raising out of
    enqueue_and_kick once the job is committed, e.g. for a producer role granted before
    queue_watchers existed: a caller that retries would enqueue the job twice. The job
    stays, and the producer kicks, as when it cannot tell who watches."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("ALTER TABLE pgkick.queue_watchers RENAME TO queue_watchers_gone")
    kicker = RecordingKicker()
    job_id = producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)
    assert count_jobs(dsn) == 1 and kicker.kicks == ["q"]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT id FROM pgkick.jobs").fetchone() == (job_id,)
    # and the lingering connection is still usable for the next call
    producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)
    assert count_jobs(dsn) == 2


def test_kick_committed_never_raises_whatever_it_is_handed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Catches: kick_committed raising before its guards (ready_queues compared a run_at it
    could not read: a review, F1, the jobs an app's dict_row connection read back as their
    column names), after the commit: a caller that retries enqueues the job again."""
    odd = [QueuedJob._make(("id", "queue", "run_at"))]
    kicker = RecordingKicker()
    failures = after_commit.stats.kick_failures
    after_commit.kick_committed(odd, kicker, contextlib.nullcontext)  # type: ignore[arg-type]
    assert kicker.kicks == []
    assert after_commit.stats.kick_failures == failures + 1
    assert "are committed" in caplog.text
