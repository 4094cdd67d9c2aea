"""Results: a task's return value stored with its job by the batch's one fenced completion
statement, capped in size; `pgkick.result` and `pgkick.wait` read it back or raise the
final error. Each test names the break it catches; each break was applied by hand and
seen to fail."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import pgkick
from pgkick.errors import JobFailed, JobNotFinished, PermanentError
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.registry import Registry
from pgkick.tasks.results import MAX_RESULT_BYTES
from pgkick.validation import job_spec
from pgkick.worker.loop import Worker, WorkerOptions
from tests.helpers import FakeClock, job_row, seed, statement_calls
from tests.spies import WatchedStore
from tests.store import JobStore

LEASE = timedelta(minutes=5)
OPTIONS = WorkerOptions(batch=10, lease=LEASE, max_fanout=0, heartbeat=False)


def forever() -> int:
    return 600_000


def drain(store: JobStore, tasks: Registry) -> Any:
    return Worker(store, tasks, NoKicker(), OPTIONS).drain("default", forever)


@pytest.fixture
def tasks() -> Registry:
    registry = Registry()

    @registry.task("echo")
    def echo(payload: Any) -> Any:
        return payload.get("give")

    @registry.task("big")
    def big(payload: Any) -> Any:
        return "x" * int(payload["chars"])

    @registry.task("odd")
    def odd(payload: Any) -> Any:
        return {1, 2}

    @registry.task("dead")
    def dead(payload: Any) -> Any:
        raise PermanentError("card declined")

    return registry


@pytest.fixture
def watched(dsn: str) -> Iterator[WatchedStore]:
    with WatchedStore.open(dsn) as opened:
        yield opened


def test_each_job_of_a_batch_gets_its_own_result_in_one_statement(
    dsn: str, watched: WatchedStore, tasks: Registry
) -> None:
    """Five jobs in one batch return different values (one returns nothing). Catches:
    results not stored, stored on the wrong jobs (arrays out of step), or completed by
    more than the one statement per batch (a per-job write)."""
    gives = [{"n": 1, "items": ["a", "é"]}, [1, 2.5], "text", 7, None]
    specs = [job_spec({"give": give}, task="echo") for give in gives]
    ids = [job.id for job in watched.insert_many([specs])]
    summary = drain(watched, tasks)
    assert summary.done == 5
    assert [job_row(dsn, i)["result"] for i in ids] == gives
    completes = [
        s for s in watched.statements if s.name in ("job_complete_many", "job_complete_and_claim")
    ]
    assert len(completes) == 1 and sorted(completes[0].params["ids"]) == sorted(ids)
    assert [pgkick.result(i, dsn=dsn) for i in ids] == gives


def test_a_result_past_the_cap_or_not_json_fails_the_job_for_good_naming_the_cap(
    dsn: str, store: JobStore, tasks: Registry
) -> None:
    """Catches: an oversized result stored anyway (or retried: it would fail every time),
    and a non-JSON result crashing the batch's completion (its batch-mates re-run)."""
    too_big, fits = (
        seed(store, 1, task="big", payload=f'{{"chars": {n}}}')[0]
        for n in (MAX_RESULT_BYTES, MAX_RESULT_BYTES - 2)  # JSON adds the two quotes
    )
    (odd,) = seed(store, 1, task="odd")
    summary = drain(store, tasks)
    assert (summary.done, summary.failed, summary.retried) == (1, 2, 0)
    row = job_row(dsn, too_big)
    assert (row["status"], row["attempts"], row["result"]) == ("failed", 1, None)
    assert f"{MAX_RESULT_BYTES + 2} bytes as JSON, larger than the limit of" in str(
        row["last_error"]
    )
    assert "pgkick.tasks.results.MAX_RESULT_BYTES" in str(row["last_error"])
    assert job_row(dsn, fits)["status"] == "done"
    odd_row = job_row(dsn, odd)
    assert odd_row["status"] == "failed" and "result: Object of type set" in str(
        odd_row["last_error"]
    )


def test_a_lost_lease_stores_no_result(dsn: str, clock: FakeClock) -> None:
    """Catches: the result written outside the completion's fence (by id alone)."""
    with JobStore.open(dsn, clock) as store:
        (job_id,) = seed(store, 1)
        (stale,) = store.claim("default", batch=1, lease=LEASE)
        clock.advance(LEASE.total_seconds() + 1)
        store.reap_expired()
        (current,) = store.claim("default", batch=1, lease=LEASE)
        assert store.complete_many([stale._replace(result='"mine"')]) == set()
        assert job_row(dsn, job_id)["result"] is None
        assert store.complete_many([current._replace(result='"theirs"')]) == {job_id}
        assert job_row(dsn, job_id)["result"] == "theirs"


def test_result_raises_the_final_error_or_says_not_finished(
    dsn: str, store: JobStore, tasks: Registry
) -> None:
    """Catches: `result` returning None for a failed or unfinished job (indistinguishable
    from a task that returned nothing), or for a job that does not exist."""
    (dead,) = seed(store, 1, task="dead")
    drain(store, tasks)
    (waiting,) = seed(store, 1, task="echo")
    with pytest.raises(JobFailed, match="card declined") as failed:
        pgkick.result(dead, dsn=dsn)
    assert failed.value.error == "PermanentError: card declined"
    with pytest.raises(JobNotFinished, match=f"job {waiting} is queued"):
        pgkick.result(waiting, dsn=dsn)
    with pytest.raises(LookupError, match="job 999999 does not exist"):
        pgkick.result(999_999, dsn=dsn)


def test_wait_looks_again_after_each_pause_until_the_job_is_done(
    dsn: str, store: JobStore, tasks: Registry
) -> None:
    """The worker runs inside wait's third pause (no thread, no real sleep). Catches: a
    wait that reads once (or caches the first answer) and times out on a done job, and
    pauses that do not grow (a tight loop hammering the row)."""
    (job_id,) = seed(store, 1, task="echo", payload='{"give": {"total": 3}}')
    pauses: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds
        if len(pauses) == 3:
            drain(store, tasks)

    looks_before = statement_calls(dsn, ["-- job_outcome:%"])
    got = pgkick.wait(job_id, timeout=10, dsn=dsn, sleep=sleep, monotonic=lambda: now[0])
    assert got == {"total": 3}
    assert pauses == [0.05, 0.1, 0.2]
    assert statement_calls(dsn, ["-- job_outcome:%"]) - looks_before == 4


def test_wait_times_out_with_bounded_pauses_and_raises_a_final_failure(
    dsn: str, store: JobStore, tasks: Registry
) -> None:
    """Catches: a wait past its timeout, pauses beyond one second, and a failed job
    waited on until the timeout instead of raising its error at once."""
    (job_id,) = seed(store, 1, task="echo")
    pauses: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    with pytest.raises(TimeoutError, match=f"job {job_id} still queued after 5 s"):
        pgkick.wait(job_id, timeout=5, dsn=dsn, sleep=sleep, monotonic=lambda: now[0])
    assert pauses[:5] == [0.05, 0.1, 0.2, 0.4, 0.8] and max(pauses) == 1.0
    assert sum(pauses) == pytest.approx(5.0)

    (dead,) = seed(store, 1, task="dead")
    drain(store, tasks)
    pauses.clear()
    with pytest.raises(JobFailed):
        pgkick.wait(dead, timeout=5, dsn=dsn, sleep=sleep, monotonic=lambda: now[0])
    assert pauses == []


@pytest.mark.parametrize(
    ("job_id", "timeout", "error", "message"),
    [
        (1, -1, ValueError, "timeout: -1 s, must be between 0 and 900"),
        (1, 10_000, ValueError, "must be between 0 and 900"),
        (1, float("nan"), ValueError, "must be between"),
        (1, "5", TypeError, "timeout: must be a number of seconds, got str"),
        ("1", 5, TypeError, "job_id: must be an int, got str"),
    ],
)
def test_bad_wait_arguments_are_refused_before_connecting(
    job_id: Any, timeout: Any, error: type[Exception], message: str
) -> None:
    """No server at this DSN: the error must be the argument's, not a connection's.
    Catches: arguments checked only after the first look (or not at all)."""
    with pytest.raises(error, match=message):
        pgkick.wait(job_id, timeout=timeout, dsn="postgresql://x:y@127.0.0.1:1/none")


def test_wait_async_looks_on_the_loops_connections_until_done_or_timeout(
    dsn: str, store: JobStore, tasks: Registry
) -> None:
    """Catches: no awaitable wait (an asyncio app had only `pgkick.wait`, whose time.sleep
    and synchronous reads block the loop), and an async wait with other rules than the sync
    one: its pauses, its timeout, a failed job's error at once, arguments refused first."""
    import asyncio

    from pgkick.connections import aio_pool

    (job_id,) = seed(store, 1, task="echo", payload='{"give": {"total": 3}}')
    (dead,) = seed(store, 1, task="dead", payload="{}")
    pauses: list[float] = []
    now = [0.0]
    drained: list[Any] = []  # the worker runs once, in the first wait's third pause

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds
        if len(pauses) == 3 and not drained:
            drained.append(await asyncio.to_thread(drain, store, tasks))

    def monotonic() -> float:
        return now[0]

    async def app() -> Any:
        with pytest.raises(ValueError, match="timeout: -1 s, must be between 0 and 900"):
            await pgkick.wait_async(job_id, timeout=-1, dsn="postgresql://x:y@127.0.0.1:1/none")
        with pytest.raises(TypeError, match="job_id: must be an int, got str"):
            await pgkick.wait_async("1", timeout=5, dsn=dsn)  # type: ignore[arg-type]
        got = await pgkick.wait_async(job_id, timeout=10, dsn=dsn, sleep=sleep, monotonic=monotonic)
        with pytest.raises(JobFailed, match="card declined"):
            await pgkick.wait_async(dead, timeout=5, dsn=dsn, sleep=sleep, monotonic=monotonic)
        (late,) = seed(store, 1, task="echo")
        del pauses[:]
        with pytest.raises(TimeoutError, match=f"job {late} still queued after 2 s"):
            await pgkick.wait_async(late, timeout=2, dsn=dsn, sleep=sleep, monotonic=monotonic)
        with pytest.raises(LookupError, match="job 999999 does not exist"):
            await pgkick.wait_async(999_999, timeout=0, dsn=dsn)
        await aio_pool.close_all()
        return got

    looks_before = statement_calls(dsn, ["-- job_outcome:%"])
    assert asyncio.run(app()) == {"total": 3}
    assert pauses[:3] == [0.05, 0.1, 0.2] and sum(pauses) == pytest.approx(2.0)
    assert statement_calls(dsn, ["-- job_outcome:%"]) - looks_before == 4 + 1 + len(pauses) + 2
