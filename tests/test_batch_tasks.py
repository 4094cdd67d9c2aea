"""Batch tasks (#33 item 4) on the real worker: many jobs in one call, an outcome per job.

Each test drives pgkick's own Worker.drain against the embedded PostgreSQL and reads the
rows after. The break each one catches is named in its docstring (each was applied by
hand and seen to fail)."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick.errors import InvalidArgument, InvalidArgumentType, PermanentError, Snooze
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.batch import BatchItem
from pgkick.tasks.registry import Registry
from pgkick.validation import JobSpec
from pgkick.worker.loop import Worker, WorkerOptions
from tests import batch_worker
from tests.helpers import FakeClock, Ticks, job_row, seed
from tests.spies import WatchedStore
from tests.store import JobStore
from tests.test_producer import RecordingKicker

LEASE = timedelta(minutes=5)
OPTIONS = WorkerOptions(batch=10, lease=LEASE, max_fanout=0, heartbeat=False, backoff_jitter=0.0)


def forever() -> int:
    return 600_000


@pytest.fixture
def timed(dsn: str, clock: FakeClock) -> Iterator[JobStore]:
    with JobStore.open(dsn, clock) as opened:
        yield opened


@dataclass
class Square:
    n: int


def enqueue(store: JobStore, task: str, payloads: list[dict[str, Any]]) -> list[int]:
    specs = [JobSpec("default", task, json.dumps(p), None, timedelta(0), 5) for p in payloads]
    return [job.id for job in store.insert_many([specs])]


def results(dsn: str, ids: list[int]) -> dict[int, tuple[str, int, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, status, attempts, result FROM pgkick.jobs WHERE id = ANY(%s)", (ids,)
        )
        return {row[0]: row[1:] for row in rows}


def test_one_call_receives_many_jobs_and_each_job_stores_its_own_result(
    dsn: str, timed: JobStore
) -> None:
    """Ten jobs of a batch=4 task and two plain jobs in one claim of 12: the batch task is
    called three times (4, 4, 2 jobs, in claim order, payloads rebuilt as the declared
    dataclass), the plain task twice, and every job is done with its own result.
    Catches: the worker running a batch task job by job (7 calls of one, or 10), groups
    larger than `batch`, or results stored on the wrong job."""
    tasks = Registry()
    calls: list[list[tuple[int, int, int]]] = []

    @tasks.task("square", batch=4)
    def square(items: list[BatchItem[Square]]) -> dict[int, int]:
        assert all(isinstance(item.payload, Square) for item in items)
        calls.append([(item.id, item.payload.n, item.attempt) for item in items])
        return {item.id: item.payload.n**2 for item in items}

    plain_runs: list[int] = []
    tasks.task("plain")(lambda payload: plain_runs.append(payload["n"]) or "plain")

    ids = enqueue(timed, "square", [{"n": n} for n in range(5)])
    plain = enqueue(timed, "plain", [{"n": 100}, {"n": 101}])
    ids += enqueue(timed, "square", [{"n": n} for n in range(5, 10)])
    options = WorkerOptions(batch=12, lease=LEASE, max_fanout=0, heartbeat=False)
    summary = Worker(timed, tasks, NoKicker(), options).drain("default", forever)

    assert [len(call) for call in calls] == [4, 4, 2]
    assert [job_id for call in calls for job_id, _, _ in call] == ids
    assert {attempt for call in calls for _, _, attempt in call} == {1}
    assert plain_runs == [100, 101]
    assert results(dsn, ids) == {job_id: ("done", 1, n * n) for n, job_id in enumerate(ids)}
    assert {row[0] for row in results(dsn, plain).values()} == {"done"}
    assert (summary.claimed, summary.done, summary.batches) == (12, 12, 1)


def test_a_partial_failure_retries_only_the_failed_jobs_the_others_are_done(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """Six jobs in one call: two fail (retried with backoff), one fails permanently, one
    snoozes, two succeed. After the backoff the next call holds only the two failed jobs,
    at attempt 2. Catches: a failure of one item failing (or retrying) the whole batch,
    the successful jobs run again, their results not stored, a permanent failure
    retried, or the snoozed job charged an attempt."""
    tasks = Registry()
    calls: list[list[tuple[int, int]]] = []

    @tasks.task("flaky", batch=10)
    def flaky(items: list[BatchItem[dict[str, int]]]) -> dict[int, object]:
        calls.append([(item.payload["n"], item.attempt) for item in items])
        out: dict[int, object] = {}
        for item in items:
            n = item.payload["n"]
            if item.attempt > 1 or n in (0, 3):
                out[item.id] = {"n": n, "ok": True}
            elif n in (1, 4):
                out[item.id] = ConnectionError(f"item {n}: upstream 503")
            elif n == 2:
                out[item.id] = PermanentError(f"item {n}: malformed")
            else:
                out[item.id] = Snooze(3600)
        return out

    ids = enqueue(timed, "flaky", [{"n": n} for n in range(6)])
    kicker = RecordingKicker()
    first = Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)

    assert calls == [[(n, 1) for n in range(6)]]
    assert (first.done, first.retried, first.failed, first.snoozed) == (2, 2, 1, 1)
    rows = {n: job_row(dsn, job_id) for n, job_id in enumerate(ids)}
    assert [(rows[n]["status"], rows[n]["result"]) for n in (0, 3)] == [
        ("done", {"n": 0, "ok": True}),
        ("done", {"n": 3, "ok": True}),
    ]
    for n in (1, 4):
        assert (rows[n]["status"], rows[n]["attempts"]) == ("queued", 1)
        assert rows[n]["last_error"] == f"ConnectionError: item {n}: upstream 503"
        assert rows[n]["run_at"] == clock.now + timedelta(seconds=20)  # 10 s x 2^1
    assert (rows[2]["status"], rows[2]["last_error"]) == (
        "failed",
        "PermanentError: item 2: malformed",
    )
    assert (rows[5]["status"], rows[5]["attempts"]) == ("queued", 0)  # attempt given back
    assert ("default", clock.now + timedelta(seconds=20)) in kicker.wakes

    clock.advance(21)  # the retries are due; the snoozed job is not
    second = Worker(timed, tasks, kicker, OPTIONS).drain("default", forever)
    assert calls[1] == [(1, 2), (4, 2)]
    assert second.done == 2
    assert results(dsn, [ids[1], ids[4]]) == {
        ids[1]: ("done", 2, {"n": 1, "ok": True}),
        ids[4]: ("done", 2, {"n": 4, "ok": True}),
    }
    assert job_row(dsn, ids[0])["finished_at"] == rows[0]["finished_at"]  # not run again


def test_a_batch_task_that_empties_its_list_as_it_works_leaves_every_job_done(
    dsn: str, timed: JobStore
) -> None:
    """Catches the worker reading the jobs' outcomes from the list it gave the task: a task
    that pops its items as it sends them (and returns None, every item done) left that list
    empty, the worker's outcome lookup raised KeyError out of the drain, and every job it
    had sent stayed running until its lease ran out, then ran again. A task that reorders
    its list is the same case."""
    tasks = Registry()
    sent: list[int] = []

    @tasks.task("send", batch=10)
    def send(items: list[BatchItem[dict[str, int]]]) -> None:
        items.reverse()
        while items:
            sent.append(items.pop().payload["n"])

    ids = enqueue(timed, "send", [{"n": n} for n in range(4)])
    summary = Worker(timed, tasks, NoKicker(), OPTIONS).drain("default", forever)
    assert sent == [0, 1, 2, 3] and summary.done == 4
    assert {job_id: row[:2] for job_id, row in results(dsn, ids).items()} == {
        job_id: ("done", 1) for job_id in ids
    }


def test_a_batch_that_raises_or_breaks_the_contract_fails_each_job_by_its_attempts(
    dsn: str, timed: JobStore
) -> None:
    """Raising fails the whole batch, each job retried by its own attempts (SQS's rule);
    an outcome naming a job outside the batch fails it whole too, saying so, and the
    result of a value that cannot be stored fails that job only, for good.
    Catches: an exception escaping the worker (the drain would raise), outcomes keyed by
    a stranger id being written, or an unstorable result crashing the batch's record."""
    tasks = Registry()

    @tasks.task("raises", batch=3)
    def raises(items: list[BatchItem[Any]]) -> None:
        raise TimeoutError("bulk API timed out")

    @tasks.task("strangers", batch=3)
    def strangers(items: list[BatchItem[Any]]) -> dict[int, object]:
        return {item.id + 1000: "done?" for item in items}

    @tasks.task("unstorable", batch=3)
    def unstorable(items: list[BatchItem[Any]]) -> dict[int, object]:
        return {items[0].id: object()}  # the others: done, no result

    raised = seed(timed, 3, task="raises")
    named = seed(timed, 2, task="strangers")
    odd = seed(timed, 2, task="unstorable")
    summary = Worker(timed, tasks, NoKicker(), OPTIONS).drain("default", forever)

    for job_id in raised:
        row = job_row(dsn, job_id)
        assert (row["status"], row["attempts"]) == ("queued", 1)
        assert row["last_error"] == "TimeoutError: bulk API timed out"
    for job_id in named:
        row = job_row(dsn, job_id)
        assert (row["status"], row["attempts"]) == ("queued", 1)
        assert "not in its batch" in row["last_error"]
        assert row["result"] is None
    bad, fine = (job_row(dsn, job_id) for job_id in odd)
    assert bad["status"] == "failed" and "not JSON serializable" in bad["last_error"]
    assert (fine["status"], fine["result"]) == ("done", None)
    assert (summary.retried, summary.failed, summary.done) == (5, 1, 1)


def test_a_job_of_the_batch_taken_over_by_another_worker_is_not_overwritten(
    dsn: str, clock: FakeClock
) -> None:
    """While the batch runs past its leases, the reaper re-queues its three jobs and
    another worker claims one of them (attempt 2). The batch then reports success for
    two and a failure for one: the taken-over job's row stays exactly as its new owner
    left it, whatever the batch said about it. Catches: a batch outcome written without
    the attempt fence (its completion or failure lands on the new owner's row)."""
    tasks = Registry()
    taken: dict[str, Any] = {}

    @tasks.task("slow", batch=3)
    def slow(items: list[BatchItem[Any]]) -> dict[int, object]:
        if items[0].attempt > 1:  # the jobs the reaper gave back, run again: fine
            return {item.id: "second run" for item in items}
        clock.advance(LEASE.total_seconds() + 1)
        with JobStore.open(dsn, clock) as other:
            assert len(other.reap_expired()) == 3
            (job,) = other.claim("default", batch=1, lease=LEASE)
        taken.update(job_row(dsn, job.id))
        return {
            items[0].id: "first run",
            items[1].id: ValueError("first run failed"),
            items[2].id: "first run",
        }

    with WatchedStore.open(dsn, clock) as watched:
        ids = seed(watched, 3, task="slow")
        summary = Worker(watched, tasks, NoKicker(), OPTIONS).drain("default", forever)
        assert watched.writes_for(taken["id"])  # the batch's outcome was sent, and fenced

    assert taken["attempts"] == 2 and taken["status"] == "running"
    assert job_row(dsn, taken["id"]) == taken  # untouched: the new owner's
    others = [job_id for job_id in ids if job_id != taken["id"]]
    assert results(dsn, others) == {job_id: ("done", 2, "second run") for job_id in others}
    assert summary.lost == 3  # the first call's three outcomes found no row of theirs


def test_a_batch_task_under_concurrent_worker_processes_runs_each_job_once(
    dsn: str, tmp_path: Path
) -> None:
    """Three worker processes drain 60 jobs of a batch=5 task; each process's first call
    waits until all three hold a batch at once. Every job runs once (one attempt), ends
    done with the result of the process that ran it, and every process ran batches.
    Catches: a batch grouping that claims or runs jobs outside its claim, or outcomes
    written for another worker's jobs."""
    with JobStore.open(dsn) as store:
        ids = seed(store, 60, task="collect")
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(3)
    workers = [
        spawn.Process(target=batch_worker.drain, args=(dsn, str(tmp_path), barrier))
        for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]

    runs = {
        int(path.stem): [
            tuple(map(int, line.split())) for line in path.read_text().split("\n") if line
        ]
        for path in tmp_path.glob("*.log")
    }
    assert len(runs) == 3 and all(runs.values())
    executions = Counter(job_id for lines in runs.values() for job_id, _ in lines)
    assert executions == Counter(ids)  # each job exactly once
    assert {attempt for lines in runs.values() for _, attempt in lines} == {1}
    final = results(dsn, ids)
    by_pid = {job_id: pid for pid, lines in runs.items() for job_id, _ in lines}
    assert final == {job_id: ("done", 1, {"by": by_pid[job_id]}) for job_id in ids}
    summaries = [json.loads(p.read_text()) for p in tmp_path.glob("*.summary")]
    assert sum(s["done"] for s in summaries) == 60 and sum(s["lost"] for s in summaries) == 0


def window_worker(
    store: JobStore, order: str, *, window: float, plain_takes: float = 0.0
) -> tuple[Worker, list[int], list[int]]:
    """A worker claiming 4 at a time over jobs laid out as `order` (B: a job of a batch=4
    task with `window`, P: a plain job that moves the worker's clock by `plain_takes`).
    Returns the worker, the sizes of the batch calls, and the jobs in order."""
    tasks = Registry()
    ticks = Ticks()
    sizes: list[int] = []
    tasks.task("grouped", batch=4, batch_window=window)(lambda items: sizes.append(len(items)))

    @tasks.task("plain")
    def plain(payload: Any) -> None:
        ticks.now += plain_takes

    ids = [seed(store, 1, task="grouped" if c == "B" else "plain")[0] for c in order]
    options = WorkerOptions(batch=4, lease=LEASE, max_fanout=0, heartbeat=False)
    worker = Worker(store, tasks, NoKicker(), options)
    worker.monotonic = ticks
    return worker, sizes, ids


def test_batch_window_tops_a_short_group_up_from_the_next_claim_never_waiting(
    dsn: str, timed: JobStore
) -> None:
    """Claims of 4 over B P B P | B P B P | B B: the first full claim leaves the group at 2,
    held (leases kept) while the worker claims again at once; the second brings it to 4,
    run in one call; the last claim is short, so its 2 run at once. A queue that empties
    after a full claim runs what is held before the worker leaves: nothing is stranded.
    Catches: a window that groups nothing across claims (calls of 2, 2, 2), a held job
    left running when the queue empties (it would wait for its lease), or a window that
    waits (the drain would sleep: it has no clock that moves here)."""
    worker, sizes, ids = window_worker(timed, "BPBPBPBPBB", window=60)
    summary = worker.drain("default", forever)
    assert sizes == [4, 2]
    assert {job_row(dsn, i)["status"] for i in ids} == {"done"}
    assert (summary.claimed, summary.done, summary.stopped_because) == (10, 10, "empty")

    worker, sizes, ids = window_worker(timed, "BPPP", window=60)
    summary = worker.drain("default", forever)  # full claim, then an empty one
    assert sizes == [1]
    assert {job_row(dsn, i)["status"] for i in ids} == {"done"}
    assert (summary.done, summary.stopped_because) == (4, "empty")


def record_size(sizes: list[int], items: list[Any]) -> None:
    sizes.append(len(items))


def test_a_batch_larger_than_the_claim_batch_fills_across_claims_under_its_window(
    dsn: str, timed: JobStore
) -> None:
    """batch=10 on a worker claiming 4 at a time: with a window, claims of 4, 4 and 2 make
    one call of 10 (the size is not capped by the claim batch, which is the worker's to
    set); without one, each claim's jobs are a call. Catches a held group capped at the
    claim batch (calls of 4, 4, 2 under the window)."""
    for window, expected in ((60, [10]), (None, [4, 4, 2])):
        tasks = Registry()
        sizes: list[int] = []
        tasks.task("wide", batch=10, batch_window=window)(partial(record_size, sizes))
        ids = seed(timed, 10, task="wide")
        options = WorkerOptions(batch=4, lease=LEASE, max_fanout=0, heartbeat=False)
        worker = Worker(timed, tasks, NoKicker(), options)
        worker.monotonic = Ticks()
        summary = worker.drain("default", forever)
        assert sizes == expected
        assert {job_row(dsn, i)["status"] for i in ids} == {"done"}
        assert summary.done == 10


def test_batch_window_runs_a_held_group_once_the_window_is_over(dsn: str, timed: JobStore) -> None:
    """B P P P | B P P P | B with plain jobs taking 61 s (the worker's clock) against a 60 s
    window: the job held after the first claim has waited past the window when the second
    claim comes, so the group of 2 runs then, not topped up further. Catches: a window
    that is never checked (one call of 3 at the end, the first job held two claims)."""
    worker, sizes, _ids = window_worker(timed, "BPPPBPPPB", window=60, plain_takes=61)
    worker.drain("default", forever)
    assert sizes == [2, 1]


def test_a_held_group_runs_before_the_worker_hands_over_for_lack_of_time(
    dsn: str, timed: JobStore
) -> None:
    """B P P P | B with the invocation's time gone after the first claim: the job held back
    for the window runs (and is completed) before the worker hands the queue over; the
    second B is left queued for the next invocation. Catches: a held job left running
    when time runs short (it would wait for its lease to expire, then the reaper)."""
    worker, sizes, ids = window_worker(timed, "BPPPB", window=60)
    # 2.5 s left after the first claim: too little for another batch, enough to run the
    # claim's jobs above the 2 s reserve (below it they go back to the queue: test_worker's
    # test_jobs_not_started_when_the_reserve_is_reached_are_given_back_and_handed_over)
    budget = iter([600_000])
    summary = worker.drain("default", lambda: next(budget, 2_500))
    assert summary.stopped_because == "time"
    assert sizes == [1]
    assert [job_row(dsn, i)["status"] for i in ids] == ["done"] * 4 + ["queued"]


@pytest.mark.parametrize(
    ("batch", "window", "error", "says"),
    [
        (0, None, InvalidArgument, "out of range: a batch holds 1 to 1000 jobs"),
        (-5, None, InvalidArgument, "out of range"),
        (True, None, InvalidArgumentType, "whole number"),
        ("10", None, InvalidArgumentType, "whole number"),
        (2.5, None, InvalidArgumentType, "whole number"),
        (5, -1, InvalidArgument, "batch_window=-1 is out of range"),
        (5, 301, InvalidArgument, "out of range: 0 to 300 s"),
        (5, float("nan"), InvalidArgument, "out of range"),
        (5, timedelta(hours=1), InvalidArgument, "out of range"),
        (5, "1s", InvalidArgumentType, "seconds or a timedelta"),
        (None, 5, InvalidArgument, "batch_window needs batch="),
    ],
)
def test_batch_sizes_out_of_range_are_refused_at_declaration(
    batch: Any, window: Any, error: type[Exception], says: str
) -> None:
    """Catches: a bad size or window accepted (a batch of 0 never runs its jobs; one above
    the claim batch is never full) or the task registered before the check."""
    tasks = Registry()
    with pytest.raises(error, match=None) as raised:
        tasks.task("sized", batch=batch, batch_window=window)(lambda items: None)
    assert says in str(raised.value) and "'sized'" in str(raised.value)
    assert tasks.names() == []


def test_a_batch_is_declared_whatever_the_claim_batch_of_the_importing_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A producer imports the task module with its own environment (PGKICK_BATCH unset or
    10): batch=1000 is declared there all the same, 1001 is refused (no claim brings
    more); a function of two parameters is refused (a batch task gets its items only)."""
    monkeypatch.setenv("PGKICK_BATCH", "10")
    tasks = Registry()
    tasks.task("big", batch=1000)(lambda items: None)
    with pytest.raises(InvalidArgument, match="out of range: a batch holds 1 to 1000"):
        tasks.task("bigger", batch=1001)(lambda items: None)
    with pytest.raises(InvalidArgumentType, match="takes one parameter"):
        tasks.task("two", batch=5)(lambda items, job: None)
    assert tasks.names() == ["big"]


def test_the_testing_kit_runs_a_batch_task_as_batches_of_one(dsn: str) -> None:
    """pgkick.testing's manual mode drains through the worker with its own recording
    registry, which knows no batch declaration: each job is a batch of one, through the
    same outcome mapping (a failed item raises its exception to the test). Catches: a
    batch task that cannot run outside a batch (its single-job form broken)."""
    from pgkick import testing

    tasks = Registry()

    @tasks.task("halves", batch=5)
    def halves(items: list[BatchItem[dict[str, int]]]) -> dict[int, object]:
        return {
            item.id: item.payload["n"] // 2 if item.payload["n"] % 2 == 0 else ValueError("odd")
            for item in items
        }

    with testing.manual(dsn, tasks=tasks, raise_errors=False) as jobs:
        even = halves.enqueue_and_kick({"n": 8})
        odd = halves.enqueue_and_kick({"n": 3})
        jobs.drain()
    assert (job_row(dsn, even)["status"], job_row(dsn, even)["result"]) == ("done", 4)
    assert job_row(dsn, odd)["last_error"] == "ValueError: odd"
    assert [str(exc) for exc in jobs.errors] == ["odd"]
