"""Durable steps: `job.step(name, fn, *args)` runs `fn` once per job and stores its JSON
result (fenced by the attempt); a retry, a continuation or a wake-up replays the finished
steps; the time budget continues a job in a fresh invocation; `job.sleep` books a wake-up.
Each test names the break it catches; each break was applied by hand and seen to fail."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick.cli.main import main
from pgkick.config import Settings
from pgkick.errors import StepInputError
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.reaper import reap
from pgkick.worker.runtime import Runtime
from pgkick_dev.ui.app import make_app
from tests.helpers import FakeClock, job_row, seed
from tests.spies import CheckedRegistry
from tests.step_tasks import steps_registry
from tests.store import JobStore
from tests.test_dashboard import client as ui_client
from tests.test_producer import RecordingKicker
from tests.test_security import login_as  # noqa: F401  (a fixture)

ROOT = Path(__file__).parent.parent
LEASE = timedelta(minutes=20)
MINUTE_MS = 60_000
RESERVE = timedelta(seconds=30)
SETTINGS = Settings.from_env({"PGKICK_KICKER": "none", "PGKICK_MIN_REMAINING_MS": "30000"})
OPTIONS = WorkerOptions(batch=10, lease=LEASE, max_fanout=0, heartbeat=False, min_remaining=RESERVE)


@dataclass
class FakeLambdaContext:
    """What the worker reads of Lambda's context: the time left, on a clock the steps move
    (it is not PostgreSQL: the database stays real)."""

    budget_ms: int = 15 * MINUTE_MS
    elapsed_ms: int = 0

    def get_remaining_time_in_millis(self) -> int:
        return self.budget_ms - self.elapsed_ms


def steps_of(dsn: str, job_id: int) -> dict[str, tuple[int, Any]]:
    """name: (the attempt that wrote it, its result)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT name, attempt, result FROM pgkick.job_steps WHERE job_id = %s", (job_id,)
        ).fetchall()
    return {name: (attempt, result) for name, attempt, result in rows}


@pytest.fixture
def timed(dsn: str, clock: FakeClock) -> Iterator[JobStore]:
    with JobStore.open(dsn, clock) as opened:
        yield opened


@pytest.mark.parametrize("through", ["worker", "runtime"])
def test_a_two_hour_job_of_steps_finishes_over_five_invocations_each_step_once(
    dsn: str, timed: JobStore, through: str
) -> None:
    """Ten 5-minute steps, 15-minute invocations (a reserve of 30 s): two steps fit in each,
    so the job continues four times and finishes in the fifth invocation, every step run
    once, no attempt used, each continuation handing the queue to a fresh invocation.
    Catches: no time budget (all ten steps in the first invocation, 50 minutes of a
    15-minute Lambda), a continuation that burns an attempt (max_attempts=1 fails the job),
    steps not replayed (a step run twice), and no kick for the continuation. `runtime`:
    the same through what the Lambda handler calls (pgkick.worker.runtime.Runtime.drain with
    the context's clock: its lease, its settings' reserve, its connection per invocation)."""
    runs: Counter[int] = Counter()
    context = FakeLambdaContext()
    tasks = Registry()

    def five_minutes(n: int) -> int:
        runs[n] += 1
        context.elapsed_ms += 5 * MINUTE_MS
        return n

    @tasks.task("long")
    def long(payload: Any, job: JobContext) -> int:
        return sum(job.step(f"part {n}", five_minutes, n) for n in range(1, 11))

    (job_id,) = seed(timed, 1, task="long", max_attempts=1)
    kicker = RecordingKicker()
    invocations: list[dict[str, object]] = []
    while job_row(dsn, job_id)["status"] == "queued":
        assert len(invocations) < 10, "the job never finished"
        context.elapsed_ms = 0  # a fresh invocation: a full budget
        remaining = context.get_remaining_time_in_millis
        if through == "worker":
            summary = Worker(timed, tasks, kicker, OPTIONS).drain("default", remaining)
        else:
            runtime = Runtime(SETTINGS, kicker, dsn=lambda: dsn, tasks=tasks)
            summary = runtime.drain("default", remaining)
        assert context.get_remaining_time_in_millis() > 0, "the invocation ran out of time"
        invocations.append(summary.as_dict())
    assert [(s["continued"], s["done"]) for s in invocations] == [(1, 0)] * 4 + [(0, 1)]
    assert kicker.kicks == [("default", "rekick")] * 4  # each continuation kicked its queue
    assert runs == Counter(range(1, 11))
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["result"], row["continued"]) == ("done", 1, 55, 4)
    assert steps_of(dsn, job_id) == {f"part {n}": (1, n) for n in range(1, 11)}


def test_a_worker_that_continued_a_job_claims_no_more_and_hands_the_queue_over(
    dsn: str, timed: JobStore
) -> None:
    """A 10-minute step, then 1-minute ones: the second invocation runs five short steps and
    continues with 10 minutes left, more than its own batch took, so its loop alone would
    claim again. Catches a worker that does not stop at a continuation: it would claim the
    job at once (continued again before any step: `stalled`), then run its next step with
    less time left than the job's longest step."""
    context = FakeLambdaContext()
    tasks = Registry()

    def minutes(n: int) -> int:
        context.elapsed_ms += (10 if n == 1 else 1) * MINUTE_MS
        return n

    @tasks.task("uneven")
    def uneven(payload: Any, job: JobContext) -> int:
        return sum(job.step(f"part {n}", minutes, n) for n in range(1, 8))

    (job_id,) = seed(timed, 1, task="uneven", max_attempts=1)
    kicker = RecordingKicker()
    invocations = []
    while job_row(dsn, job_id)["status"] == "queued" and len(invocations) < 6:
        context.elapsed_ms = 0
        invocations.append(
            Worker(timed, tasks, kicker, OPTIONS).drain(
                "default", context.get_remaining_time_in_millis
            )
        )
    assert [(s.claimed, s.continued, s.done) for s in invocations] == [
        (1, 1, 0),
        (1, 1, 0),
        (1, 0, 1),
    ]
    assert kicker.kicks == [("default", "rekick")] * 2
    assert job_row(dsn, job_id)["result"] == 28


def test_a_step_longer_than_an_invocation_is_run_not_continued_for_ever(
    dsn: str, timed: JobStore
) -> None:
    """Steps of 20 minutes in 15-minute invocations never fit any estimate. Catches a
    budget with no stall guard: the job would be continued in every invocation, for ever."""
    context = FakeLambdaContext()
    tasks = Registry()

    def twenty_minutes(n: int) -> int:
        context.elapsed_ms += 20 * MINUTE_MS
        return n

    @tasks.task("too_long")
    def too_long(payload: Any, job: JobContext) -> int:
        return sum(job.step(f"part {n}", twenty_minutes, n) for n in range(1, 4))

    (job_id,) = seed(timed, 1, task="too_long", max_attempts=1)
    for _ in range(8):
        if job_row(dsn, job_id)["status"] != "queued":
            break
        context.elapsed_ms = 0
        Worker(timed, tasks, RecordingKicker(), OPTIONS).drain(
            "default", context.get_remaining_time_in_millis
        )
    row = job_row(dsn, job_id)
    assert (row["status"], row["result"]) == ("done", 6)
    # one step per invocation after its first, each time after a continuation made on claim
    assert row["continued"] == 4


def test_the_stall_guard_lets_one_step_run_then_a_late_claim_continues_again(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """10-minute steps: a claim with 5 minutes left continues the job before any step
    (stalled), the next invocation runs that step whatever its estimate, then sleeps; woken
    and claimed with 5 minutes left, the job must continue, not start a 10-minute step.
    Catches the stalled flag kept after the step it was for ran (a review): every later
    run's first step ignored the estimate, and the invocation ran 5 minutes past its end
    (on Lambda: killed at its timeout, the attempt charged)."""
    context = FakeLambdaContext()
    tasks = Registry()

    def ten_minutes(n: int) -> int:
        context.elapsed_ms += 10 * MINUTE_MS
        return n

    @tasks.task("napping")
    def napping(payload: Any, job: JobContext) -> int:
        first = job.step("one", ten_minutes, 1) + job.step("two", ten_minutes, 2)
        job.sleep(3600)
        return first + job.step("three", ten_minutes, 3)

    def invocation(minutes: int) -> dict[str, object]:
        context.budget_ms, context.elapsed_ms = minutes * MINUTE_MS, 0
        worker = Worker(timed, tasks, RecordingKicker(), OPTIONS)
        summary = worker.drain("default", context.get_remaining_time_in_millis)
        assert context.get_remaining_time_in_millis() >= 0, "the invocation overran its end"
        return summary.as_dict()

    (job_id,) = seed(timed, 1, task="napping", max_attempts=1)
    assert invocation(15)["continued"] == 1  # "one" ran; "two" does not fit
    assert invocation(5)["continued"] == 1  # claimed late: continued before any step
    assert invocation(15)["snoozed"] == 1  # "two" ran (the stall guard), then the sleep
    clock.advance(3600)
    assert invocation(5)["continued"] == 1  # woken late: "three" does not fit
    assert invocation(15)["done"] == 1
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["result"]) == ("done", 1, 6)


def test_a_job_claimed_late_twice_in_a_row_continues_again_instead_of_overrunning(
    dsn: str, timed: JobStore
) -> None:
    """10-minute steps: continued with 5 minutes left before any step (stalled), the job is
    claimed late again, with 3 minutes left. The stall guard must compare that with the 5
    minutes its stall had (jobs.continued_left_ms) and continue again, not start the step.
    Catches a guard that knew only "stalled last time": it ran the 10-minute step with 3
    minutes left, and the invocation overran its end by 7 (on Lambda: killed at its
    timeout, the attempt charged)."""
    context = FakeLambdaContext()
    tasks = Registry()

    def ten_minutes(n: int) -> int:
        context.elapsed_ms += 10 * MINUTE_MS
        return n

    @tasks.task("twice_late")
    def twice_late(payload: Any, job: JobContext) -> int:
        return job.step("one", ten_minutes, 1) + job.step("two", ten_minutes, 2)

    def invocation(minutes: int) -> dict[str, object]:
        context.budget_ms, context.elapsed_ms = minutes * MINUTE_MS, 0
        worker = Worker(timed, tasks, RecordingKicker(), OPTIONS)
        summary = worker.drain("default", context.get_remaining_time_in_millis)
        assert context.get_remaining_time_in_millis() >= 0, "the invocation overran its end"
        return summary.as_dict()

    (job_id,) = seed(timed, 1, task="twice_late", max_attempts=1)
    assert invocation(15)["continued"] == 1  # "one" ran; "two" does not fit
    assert invocation(5)["continued"] == 1  # claimed late: continued before any step
    assert invocation(3)["continued"] == 1  # late again, later than the stall: continued
    # what the guard compares with: the stall's time left less the reserve, the larger kept
    assert job_row(dsn, job_id)["continued_left_ms"] == 5 * MINUTE_MS - 30_000
    assert invocation(15)["done"] == 1  # a fresh invocation: "two" runs
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["result"], row["continued"]) == ("done", 1, 3, 3)


def test_a_worker_killed_mid_step_resumes_at_that_step_without_rerunning_the_finished(
    dsn: str, tmp_path: Path, clock: FakeClock
) -> None:
    """A real worker process is SIGKILLed inside step 3 of 5; the lease expires, the reaper
    re-queues the job, another worker runs it. Catches: steps not stored as they finish
    (steps 1 and 2 would run twice: their side effects counted), or not replayed."""
    effects = tmp_path / "effects"
    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1, task="five_steps")
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.step_tasks", dsn, str(effects)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert worker.stdout is not None
        ready, _, _ = select.select([worker.stdout], [], [], 60)
        assert ready, "the worker never reached step 3"
        assert worker.stdout.readline() == b"hanging in step 3\n"
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(30) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert steps_of(dsn, job_id).keys() == {"step 1", "step 2"}

    clock.now = datetime.now(UTC) + timedelta(minutes=2)  # past the dead worker's lease
    with JobStore.open(dsn, clock) as store:
        assert [reaped.id for reaped in store.reap_expired()] == [job_id]
        summary = Worker(store, steps_registry(effects), RecordingKicker(), OPTIONS).drain(
            "default", lambda: 600_000
        )
    assert summary.done == 1
    first_three = ["start 1", "done 1", "start 2", "done 2", "start 3", "start 3", "done 3"]
    assert Counter(effects.read_text().splitlines()) == Counter(
        [*first_three, "start 4", "done 4", "start 5", "done 5"]
    )
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["result"]) == ("done", 2, 55)
    written = {name: attempt for name, (attempt, _) in steps_of(dsn, job_id).items()}
    assert written == {"step 1": 1, "step 2": 1, "step 3": 2, "step 4": 2, "step 5": 2}


def test_a_step_write_after_the_lease_was_taken_over_is_refused(
    dsn: str, clock: FakeClock, checked_tasks: CheckedRegistry
) -> None:
    """Step 2 stalls past its lease, another worker takes the job, then step 2 returns.
    Catches: an unfenced step write (the new owner's job would get the old attempt's
    result, replayed as if it were its own) and a task that goes on after the refusal."""
    after: list[str] = []

    def stalls() -> str:
        clock.advance(LEASE.total_seconds() + 1)
        with JobStore.open(dsn, clock) as other:
            other.reap_expired()
            other.claim("default", batch=1, lease=LEASE)
        return "late"

    @checked_tasks.task("fenced")
    def fenced(payload: Any, job: JobContext) -> None:
        job.step("one", lambda: 1)
        job.step("two", stalls)
        after.append("ran on")

    with JobStore.open(dsn, clock) as store:
        (job_id,) = seed(store, 1, task="fenced")
        summary = Worker(store, checked_tasks, RecordingKicker(), OPTIONS).drain(
            "default", lambda: 600_000
        )
    checked_tasks.reraise()
    assert steps_of(dsn, job_id) == {"one": (1, 1)}
    assert after == [] and summary.lost == 1
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == (
        "running",
        2,
        "lease expired (attempt 1 of 5)",
    )


def test_sleep_requeues_the_job_with_a_wake_up_and_replays_its_steps_after_it(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """Catches: a sleep that holds the worker (no re-queue), no wake-up booked (nothing
    would run the job: no poller), a sleep that uses an attempt, and a sleep not stored
    (the job would sleep again on every wake-up)."""
    runs: Counter[str] = Counter()
    tasks = Registry()

    def count(name: str) -> str:
        runs[name] += 1
        return name

    @tasks.task("sleepy")
    def sleepy(payload: Any, job: JobContext) -> str:
        first = job.step("before", count, "before")
        job.sleep(3600)
        return first + "+" + job.step("after", count, "after")

    (job_id,) = seed(timed, 1, task="sleepy", max_attempts=1)
    kicker = RecordingKicker()
    slept = Worker(timed, tasks, kicker, OPTIONS).drain("default", lambda: 600_000)
    due = clock.now + timedelta(hours=1)
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["run_at"]) == ("queued", 0, due)
    assert ("default", due) in {(q, when.astimezone(UTC)) for q, when in kicker.wakes}
    assert (slept.snoozed, runs) == (1, Counter(["before"]))

    clock.advance(3599)
    assert Worker(timed, tasks, kicker, OPTIONS).drain("default", lambda: 600_000).claimed == 0
    clock.advance(1)
    woken = Worker(timed, tasks, kicker, OPTIONS).drain("default", lambda: 600_000)
    assert woken.done == 1 and runs == Counter(["before", "after"])
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["result"]) == ("done", 1, "before+after")
    assert steps_of(dsn, job_id).keys() == {"before", "sleep:1", "after"}


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (lambda job: job.step("fetch", lambda n: n, 2), "already finished in this job"),
        (lambda job: job.step("other", lambda: {1, 2}), "not storable JSON"),
        (lambda job: job.step("other", lambda o: 1, object()), "must be JSON values"),
        # a review: after an unnamed sleep (stored as sleep:1), sleep(1, name="1") replayed
        # it and returned at once
        (lambda job: job.sleep(1, name="1"), "the key of the job's unnamed sleep number 1"),
        # a review: the inner step stored the name, the outer one's write then stored
        # nothing and was taken for a lost lease (retried, it replayed the inner's result)
        (
            lambda job: job.step("outer", lambda: job.step("outer", lambda: 2)),
            "runs a step of its own name inside it",
        ),
        # a review: a name past 128 characters (f"page {url}") was retried to the end
        (lambda job: job.step("page " + "u" * 200, lambda: 1), "at most 128 allowed"),
        (lambda job: job.sleep(1, name="s" * 200), "at most 128 allowed"),
        # a review: a sleep inside a step was taken; the replay, which runs no stored
        # step's fn, gave its number to the next unnamed sleep, and an hour's sleep was
        # skipped as over
        (lambda job: job.step("wait", lambda: job.sleep(60)), "not inside job.step"),
        # a review: bad seconds were an ordinary failure, retried into the same error
        (lambda job: job.sleep(float("nan")), "a number of seconds"),
        (lambda job: job.sleep(31 * 86400), "a number of seconds"),
    ],
    ids=[
        "name reused with other arguments",
        "non-JSON result",
        "non-JSON argument",
        "sleep named like an unnamed one",
        "step named as the step it runs in",
        "step name too long",
        "sleep name too long",
        "sleep inside a step",
        "sleep of NaN seconds",
        "sleep past 30 days",
    ],
)
def test_bad_steps_fail_the_job_for_good_before_anything_is_stored(
    dsn: str, timed: JobStore, second: Any, message: str
) -> None:
    """Catches: a reused name replaying the other step's result (or overwriting it), a
    result stored half-written or failing in the database after the step ran, and such a
    job retried (the same code would fail the same way, after running its steps again)."""
    tasks = Registry()

    @tasks.task("bad")
    def bad(payload: Any, job: JobContext) -> None:
        job.step("fetch", lambda n: n, 1)
        second(job)

    (job_id,) = seed(timed, 1, task="bad")
    Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", lambda: 600_000)
    row = job_row(dsn, job_id)
    assert row["status"] == "failed" and row["attempts"] == 1
    assert str(row["last_error"]).startswith(StepInputError.__name__)
    assert message in str(row["last_error"])
    assert steps_of(dsn, job_id) == {"fetch": (1, 1)}


def test_a_steps_result_is_the_same_on_its_first_run_as_on_a_replay(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """A step's result feeds the next step's arguments, which a replay compares. Catches
    the first run handing back Python's own JSON of the result where a replay reads
    jsonb's (2.5e16 a float, then the integer it equals; an object's keys in the order
    written, then jsonb's): after the sleep the next step's arguments differed and the job
    failed for good (StepInputError, a review). And a sleep's seconds compared on the
    replay: a sleep until a deadline, whose seconds differ (here: none left) every run."""
    seen: list[Any] = []
    tasks = Registry()

    @tasks.task("report")
    def report(payload: Any, job: JobContext) -> str:
        total = job.step("sum sizes", lambda: 25e15)
        prices = job.step("fetch prices", lambda: {"widget": 3, "nut": 1})
        seen.append((total, list(prices)))
        job.step("store", lambda t, p: None, total, list(prices.items()))
        deadline = clock.now + timedelta(seconds=3600) if not seen[1:] else clock.now
        job.sleep((deadline - clock.now).total_seconds())
        return "ok"

    (job_id,) = seed(timed, 1, task="report", max_attempts=1)
    worker = Worker(timed, tasks, RecordingKicker(), OPTIONS)
    assert worker.drain("default", lambda: 600_000).snoozed == 1
    clock.advance(3600)
    assert worker.drain("default", lambda: 600_000).done == 1, job_row(dsn, job_id)
    assert seen[0] == seen[1] and type(seen[0][0]) is type(seen[1][0])


@pytest.mark.parametrize("seconds", [-5.0, 0])
def test_a_sleep_with_no_time_left_returns_at_once_and_is_stored_over(
    dsn: str, timed: JobStore, seconds: float
) -> None:
    """`job.sleep(deadline - time.time())` run after its deadline passed, on its first
    meeting (the job waited in a backlog). Catches the sleep refused as a snooze of <= 0
    seconds: an ordinary failure, retried into the same error until the job failed (a
    review). The sleep is stored over: a replay returns whatever its seconds then."""
    tasks = Registry()

    @tasks.task("late")
    def late(payload: Any, job: JobContext) -> str:
        job.step("before", lambda: 1)
        job.sleep(seconds)
        return job.step("after", lambda: "on time")

    (job_id,) = seed(timed, 1, task="late", max_attempts=1)
    summary = Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", lambda: 600_000)
    row = job_row(dsn, job_id)
    assert (summary.done, summary.snoozed) == (1, 0), row["last_error"]
    assert (row["status"], row["attempts"], row["result"]) == ("done", 1, "on time")
    assert steps_of(dsn, job_id).keys() == {"before", "sleep:1", "after"}


def test_the_worker_role_can_run_steps_and_the_purge_deletes_them(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811  (the fixture imported above)
    clock: FakeClock,
) -> None:
    """Steps, a continuation and a sleep as pgkick_worker (a login role in it, no more),
    then the maintainer's purge. Catches a grant missing from role_setup (the step write's
    share lock needs UPDATE on jobs, the continuation its columns) and steps left behind
    by the purge (no ON DELETE CASCADE)."""
    context = FakeLambdaContext(budget_ms=8 * MINUTE_MS)
    tasks = Registry()

    def five_minutes(n: int) -> int:
        context.elapsed_ms += 5 * MINUTE_MS
        return n

    @tasks.task("as_worker")
    def as_worker(payload: Any, job: JobContext) -> int:
        total = job.step("a", five_minutes, 1) + job.step("b", five_minutes, 2)
        job.sleep(60)
        return total

    with JobStore.open(dsn, clock) as admin:
        (job_id,) = seed(admin, 1, task="as_worker", max_attempts=1)
    with JobStore.open(login_as["worker"], clock) as worker:
        for _ in range(3):  # continued at "b", asleep after "b", done
            context.elapsed_ms = 0
            Worker(worker, tasks, RecordingKicker(), OPTIONS).drain(
                "default", context.get_remaining_time_in_millis
            )
            clock.advance(60)
    row = job_row(dsn, job_id)
    assert (row["status"], row["result"], row["continued"]) == ("done", 3, 1)
    assert steps_of(dsn, job_id).keys() == {"a", "b", "sleep:1"}
    with JobStore.open(login_as["maintainer"], clock) as maintainer:
        assert reap(maintainer, RecordingKicker(), retention=timedelta(0))["purged"] == 1
    assert steps_of(dsn, job_id) == {}


def test_a_continued_job_writes_what_it_spawned_once_when_it_completes(
    dsn: str, clock: FakeClock
) -> None:
    """A task spawns, then its second step does not fit the invocation: the continuation
    writes no child (the buffer is dropped: pgkick.worker.spawn); the fresh invocation's
    replay spawns again (not a step) and its completion writes the children, once.
    Catches a continuation that kept or wrote the first invocation's children."""
    context = FakeLambdaContext(budget_ms=8 * MINUTE_MS)
    tasks = Registry()
    spawned: list[list[int]] = []

    def five_minutes(n: int) -> int:
        context.elapsed_ms += 5 * MINUTE_MS
        return n

    @tasks.task("spawns_then_steps")
    def spawns_then_steps(payload: Any, job: JobContext) -> int:
        spawned.append(
            job.spawn_many({"payload": i, "task": "kid", "queue": "kids"} for i in range(3))
        )
        return int(job.step("a", five_minutes, 1) + job.step("b", five_minutes, 2))

    with JobStore.open(dsn, clock) as store:
        (job_id,) = seed(store, 1, task="spawns_then_steps")

        def invocation() -> Any:
            context.elapsed_ms = 0
            return Worker(store, tasks, RecordingKicker(), OPTIONS).drain(
                "default", context.get_remaining_time_in_millis
            )

        assert invocation().continued == 1
        assert store.one("SELECT count(*) FROM pgkick.jobs") == (1,)
        assert invocation().done == 1
        kids = store.rows("SELECT id FROM pgkick.jobs WHERE task = 'kid' ORDER BY id")
    assert len(spawned) == 2 and spawned[0] != spawned[1]  # the replay's ids are fresh
    assert [row[0] for row in kids] == spawned[1]
    assert job_row(dsn, job_id)["result"] == 3


def test_pgkick_job_and_the_dashboard_show_a_jobs_durable_steps(
    dsn: str, timed: JobStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a job page that hides where a task of steps stands: each step's name, the
    attempt that wrote it, its duration and its stored result (cut: a result may be large),
    and a sleep with its end, in `pgkick job ID` (text and --json) and the dashboard."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    tasks = Registry()

    @tasks.task("stepped")
    def stepped(payload: Any, job: JobContext) -> None:
        job.step("small", lambda: {"rows": 7})
        job.step("large", lambda: "x" * 5000)
        job.sleep(3600)

    (job_id,) = seed(timed, 1, task="stepped", max_attempts=1)
    Worker(timed, tasks, RecordingKicker(), OPTIONS).drain("default", lambda: 600_000)
    assert main(["job", str(job_id), "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "steps (3):" in out
    assert "small  attempt 1  " in out and 'result: {"rows": 7}' in out
    large = next(line for line in out.splitlines() if line.startswith("  large"))
    assert large.endswith('"' + "x" * 199 + "...") and len(large) < 300
    assert "sleep until" in out
    assert main(["job", str(job_id), "--dsn", dsn, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["steps"]
    cut = {s["name"]: (s["attempt"], s["result_cut"]) for s in shown}
    assert (cut["small"], cut["large"]) == ((1, False), (1, True))
    with ui_client(make_app(dsn)) as ui:
        page = ui.get(f"/jobs/{job_id}").text
    assert 'id="steps"' in page and "<td>small</td>" in page
    assert "x" * 199 + "…" in page and "x" * 201 not in page
