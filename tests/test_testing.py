"""pgkick.testing: inline and manual modes, through the real claim/complete path."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgkick
from pgkick import testing
from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.tasks.registry import Registry
from tests import example_shop
from tests.helpers import job_row


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn) as opened:
        opened.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        opened.commit()
        example_shop.SENT.clear()
        yield opened


# -- the README's example: an app's own task, tested inline --------------------------
def test_checkout_sends_a_receipt(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Catches: inline mode not running the task right after the commit, or only the
    first job of a queue (the second job's kick must reach a drain too)."""
    with testing.inline(dsn) as jobs:
        example_shop.checkout(conn, order=42, email="a@b.c")
        assert example_shop.SENT == [{"order": 42, "email": "a@b.c"}]
        example_shop.checkout(conn, order=43, email="b@b.c")
    assert jobs.ran(task="example_send_receipt") == [
        {"order": 42, "email": "a@b.c"},
        {"order": 43, "email": "b@b.c"},
    ]
    assert jobs.enqueued() == []


def test_inline_runs_nothing_for_a_rollback(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Catches: inline mode running a job at enqueue time instead of after the commit."""
    with testing.inline(dsn) as jobs:
        example_shop.checkout(conn, order=1, email="a@b.c")
        with pytest.raises(psycopg.errors.UniqueViolation):
            example_shop.checkout(conn, order=1, email="again@b.c")  # duplicate order
    assert jobs.ran() == [{"order": 1, "email": "a@b.c"}]


def test_inline_fences_and_records_outcomes_as_a_worker_does(dsn: str) -> None:
    """Catches: a mode that calls the function directly: the job row would stay `queued`,
    a follow-up enqueued by a task in another queue would never run, and a job due later
    would run at once."""
    tasks = Registry()

    @tasks.task("parent")
    def parent(payload: dict[str, int]) -> None:
        child.enqueue_and_kick({"n": payload["n"] + 1}, queue="children")

    @tasks.task("child")
    def child(payload: dict[str, int]) -> None:
        pass

    with testing.inline(dsn, tasks=tasks) as jobs:
        first = parent.enqueue_and_kick({"n": 1})
        later = child.enqueue_and_kick({"n": 9}, delay=3600)
    assert jobs.ran() == [{"n": 1}, {"n": 2}]
    assert (job_row(dsn, first)["status"], job_row(dsn, first)["attempts"]) == ("done", 1)
    assert job_row(dsn, later)["status"] == "queued"
    assert [queue for queue, _when in jobs.wakes] == ["default"]


def test_manual_keeps_jobs_queued_until_drain(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """Catches: manual mode running jobs on kick, `enqueued` missing a job or its payload,
    or drain() leaving ready jobs behind."""
    with testing.manual(dsn) as jobs:
        example_shop.checkout(conn, order=7, email="m@b.c")
        pgkick.enqueue_and_kick({"other": True}, task="noop", queue="misc")
        assert example_shop.SENT == []
        assert jobs.enqueued(task="example_send_receipt") == [{"order": 7, "email": "m@b.c"}]
        assert jobs.enqueued(queue="misc") == [{"other": True}]
        assert jobs.drain() == 2
        assert jobs.enqueued() == []
    assert example_shop.SENT == [{"order": 7, "email": "m@b.c"}]


def test_a_task_error_fails_the_test_after_the_worker_recorded_it(dsn: str) -> None:
    """Catches: a task's exception swallowed (the worker turns it into a retry, so the test
    would pass), or raised before the worker recorded the attempt (the row would differ
    from production), and its retry's wake-up listed twice in `wakes`."""
    tasks = Registry()

    @tasks.task("broken")
    def broken(payload: dict[str, Any]) -> None:
        raise KeyError("customer")

    with pytest.raises(AssertionError, match="a pgkick task raised: KeyError"):
        with testing.inline(dsn, tasks=tasks) as jobs:
            job_id = broken.enqueue_and_kick({})
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"]) == ("queued", 1)  # a retry booked, as in prod
    assert "KeyError" in str(row["last_error"])
    assert len(jobs.errors) == 1
    # its retry's wake-up, listed once: the worker's retry and its sweep on leaving both
    # book it, one schedule on AWS (named by queue and minute), one entry here
    assert jobs.wakes == [("default", row["run_at"])]


def test_a_task_taking_the_job_gets_its_real_context_under_testing(dsn: str) -> None:
    """Catches pgkick.testing's recording registry answering "takes no job" for every task
    (it finds tasks in the app's registry, not its own): the worker then handed tasks a
    blank context (id 0, attempt 0, the same idempotency key for every job)."""
    tasks = Registry()
    seen: list[tuple[int, int, str]] = []

    @tasks.task("with_job")
    def with_job(payload: dict[str, Any], job: pgkick.JobContext) -> None:
        seen.append((job.id, job.attempt, job.idempotency_key))

    with testing.inline(dsn, tasks=tasks):
        first = with_job.enqueue_and_kick({})
        second = with_job.enqueue_and_kick({})
    assert [(i, a) for i, a, _ in seen] == [(first, 1), (second, 1)]
    assert len({key for _, _, key in seen}) == 2


def test_a_task_that_sleeps_or_snoozes_is_not_a_failure_under_testing(dsn: str) -> None:
    """Catches the block raising `a pgkick task raised: Snooze` for a task that slept or
    snoozed (a review): the worker hands the job back, due later, as in production, and
    an app's correct test failed."""
    tasks = Registry()

    @tasks.task("naps")
    def naps(payload: dict[str, Any], job: pgkick.JobContext) -> None:
        if payload["how"] == "sleep":
            job.sleep(60)
        raise pgkick.Snooze(60)

    with testing.inline(dsn, tasks=tasks) as jobs:
        slept = naps.enqueue_and_kick({"how": "sleep"})
        snoozed = naps.enqueue_and_kick({"how": "snooze"})
    assert jobs.errors == []
    for job_id in (slept, snoozed):
        row = job_row(dsn, job_id)
        assert (row["status"], row["attempts"]) == ("queued", 0)
    assert [queue for queue, _ in jobs.wakes] == ["default", "default"]


def test_ran_takes_the_tasks_handle_as_the_other_readers_do(dsn: str) -> None:
    """Catches (review 61, testkit) `ran(handle)` answering [] for a task that ran: it
    compared the handle with the recorded names, while jobs(), enqueued() and the assertions
    take a name or the handle, so `assert jobs.ran(send_receipt) == []` passed falsely."""
    tasks = Registry()
    note = tasks.task("ran_note")(lambda payload: None)
    with testing.inline(dsn, tasks=tasks) as jobs:
        note.enqueue_and_kick({"n": 1})
    assert jobs.ran(note) == jobs.ran("ran_note") == [{"n": 1}]


def test_manual_drain_runs_what_its_jobs_make_ready_in_any_queue(dsn: str) -> None:
    """Catches (review 61, testkit) manual drain() running a dependant its parent released
    only when both were in one queue (the worker's drain of that queue took it): in another
    queue it stayed queued, drain() said 1, and the same graph gave 2 in one queue."""
    tasks = Registry()
    parent = tasks.task("drain_parent")(lambda payload: None)
    child = tasks.task("drain_child")(lambda payload: None)
    with testing.manual(dsn, tasks=tasks) as jobs:
        first = parent.enqueue_and_kick({}, queue="drain_a")
        child.enqueue_and_kick({}, queue="drain_b", after=[first])
        assert jobs.ran() == []
        assert jobs.drain() == 2
        assert [job["status"] for job in jobs.jobs()] == ["done", "done"]
        child.enqueue_and_kick({}, queue="drain_b")  # after the drain: queued again
        assert jobs.enqueued() == [{}]


def test_advance_runs_a_retry_due_later_without_sleeping(dsn: str) -> None:
    """Catches (review 61, testkit) a kit with no clock of its own: a job due later (a
    retry's backoff, a snooze, a delay) could be run only by sleeping it out, so an app's
    test of "fails once, then succeeds" slept its backoff or was not written."""
    tasks = Registry()
    attempts: list[tuple[str, int]] = []

    @tasks.task("advance_flaky")
    def flaky(payload: dict[str, Any], job: pgkick.JobContext) -> None:
        attempts.append((payload["name"], job.attempt))
        if payload["name"] == "flaky" and job.attempt == 1:
            raise RuntimeError("the first attempt fails")

    with testing.inline(dsn, tasks=tasks, raise_errors=False) as jobs:
        retried = flaky.enqueue_and_kick({"name": "flaky"})
        assert job_row(dsn, retried)["status"] == "queued"  # retried 20 s (+-10%) later
        assert jobs.advance(10) == 0
        assert jobs.advance(timedelta(seconds=50)) == 1  # the retry, no sleep
        later = flaky.enqueue_and_kick({"name": "later"}, delay=timedelta(seconds=30))
        assert jobs.advance(29) == 0  # the delay counts from the kit's moved clock
        assert jobs.advance(1) == 1
        for bad in (float("nan"), float("inf"), -1, True, "5"):  # refused, nothing moved
            with pytest.raises((InvalidArgument, InvalidArgumentType)):
                jobs.advance(bad)  # type: ignore[arg-type]
        assert jobs.advance(0) == 0
    assert attempts == [("flaky", 1), ("flaky", 2), ("later", 1)]
    assert [type(error) for error in jobs.errors] == [RuntimeError]
    assert [job_row(dsn, i)["status"] for i in (retried, later)] == ["done", "done"]
