"""Jobs that wait for others (issue 34): `after=` on every synchronous enqueue form, the
release by the last parent's completion (in the database, kicked by the worker that wrote
it), failures and cancels propagated by policy, fan-out from inside a task and the join.

The DAG and the fan-out run in several worker processes at once (tests/dependency_worker.py,
the real Worker loop); the rest drive the worker in-process on the real code path."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import pgkick
import tests.dependency_tasks  # dag_node, fan_out, fan_child, fan_join, spawn_then, ...
from pgkick import aio
from pgkick.cli.main import main
from pgkick.connections.db import Database
from pgkick.errors import InvalidArgument, InvalidArgumentType, UnknownParent
from pgkick.kick.kickers import NoKicker
from pgkick.producer.enqueue import Enqueuer
from pgkick.store.migrations import migrate
from pgkick.store.producer import ProducerStore
from pgkick.tasks.registry import registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.local.kicker import LOOP_LIMIT, LocalKicker
from pgkick_dev.ui.app import make_app
from tests.helpers import FakeClock
from tests.store import JobStore
from tests.test_dashboard import client as ui_client
from tests.test_security import login_as  # noqa: F401  (a fixture)
from tests.test_watch import RecordingKicker

ROOT = Path(__file__).parent.parent
NO_KICKS = NoKicker()
# A retry due at once (backoff 0: run_at = the failure's now): due for the same drain's next
# claim. A 1 ms backoff raced that claim (a fast claim came before it was due, the drain
# ended, and the retry was left undone: flaky under some loads).
FAST_RETRY = WorkerOptions(heal=False, backoff=timedelta(0), backoff_cap=None)


def _forever() -> int:
    return 60_000


def _runs(folder: Path) -> dict[int, list[tuple[str, int, int]]]:
    """job id -> [(name, start_ns, end_ns), ...] over every worker process's file."""
    runs: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for path in folder.glob("*.runs"):
        for line in path.read_text().splitlines():
            job_id, name, start, end = line.split()
            runs[int(job_id)].append((name, int(start), int(end)))
    return runs


def _statuses(dsn: str) -> dict[int, tuple[str, str | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, status, last_error FROM pgkick.jobs ORDER BY id")
        return {row[0]: (row[1], row[2]) for row in rows}


@contextmanager
def worker_processes(dsn: str, folder: Path, queues: list[str], count: int) -> Iterator[None]:
    """`count` processes running the real Worker over `queues` until the block ends."""
    stop = folder / "stop"
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "PGKICK_TEST_RECORD": str(folder),
        "PGKICK_TEST_STOP": str(stop),
        "PYTHONPATH": str(ROOT),
        "PGKICK_TASKS": "tests.dependency_tasks",
    }
    procs = [
        subprocess.Popen([sys.executable, "-m", "tests.dependency_worker", *queues], env=env)
        for _ in range(count)
    ]
    try:
        yield
    finally:
        stop.touch()
        for proc in procs:
            assert proc.wait(timeout=60) == 0


def _wait_final(dsn: str, deadline_s: float) -> dict[int, tuple[str, str | None]]:
    deadline = time.monotonic() + deadline_s
    while True:
        statuses = _statuses(dsn)
        if all(s in ("done", "failed") for s, _ in statuses.values()):
            return statuses
        if time.monotonic() > deadline:
            return statuses
        time.sleep(0.05)


def test_diamond_dags_run_each_node_once_after_its_parents_across_worker_processes(
    dsn: str, tmp_path: Path
) -> None:
    """20 diamonds (a; b and c after a, in two queues; d after b and c), enqueued while
    three worker processes drain both queues: every node runs once, after its parents."""
    parents: dict[int, list[int]] = {}
    with worker_processes(dsn, tmp_path, ["default", "other"], 3):
        for n in range(20):
            node = {"sleep": 0.002}
            a = pgkick.enqueue_and_kick(
                {**node, "name": f"a{n}"}, task="dag_node", dsn=dsn, kicker=NO_KICKS
            )
            b = pgkick.enqueue_and_kick(
                {**node, "name": f"b{n}"}, task="dag_node", dsn=dsn, kicker=NO_KICKS, after=[a]
            )
            c = pgkick.enqueue_many(
                [
                    {
                        "payload": {**node, "name": f"c{n}"},
                        "task": "dag_node",
                        "queue": "other",
                        "after": [(a, "fail")],
                    }
                ],
                dsn=dsn,
                kicker=NO_KICKS,
            )[0]
            with psycopg.connect(dsn) as conn, pgkick.transaction(conn, kicker=NO_KICKS) as jobs:
                d = jobs.enqueue(
                    {**node, "name": f"d{n}"}, task="dag_node", after={b: "fail", c: "fail"}
                )
            parents.update({a: [], b: [a], c: [a], d: [b, c]})
        statuses = _wait_final(dsn, 60)
    assert {s for s, _ in statuses.values()} == {"done"}, statuses
    runs = _runs(tmp_path)
    assert sorted(runs) == sorted(parents)
    assert all(len(r) == 1 for r in runs.values()), {j: r for j, r in runs.items() if len(r) > 1}
    for job, of in parents.items():
        start = runs[job][0][1]
        assert all(runs[p][0][2] <= start for p in of), (job, of, runs[job], [runs[p] for p in of])


def test_a_failed_or_cancelled_parent_ends_its_dependants_by_policy_transitively(
    dsn: str,
) -> None:
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        root = enqueue({"name": "root", "fail": True}, task="dag_node")
        fails = enqueue({"name": "x"}, task="dag_node", after=[(root, "fail")])
        cancels = enqueue({"name": "x"}, task="dag_node", after=[(root, "cancel")])
        anyway = enqueue({"name": "anyway"}, task="dag_node", after=[(root, "run anyway")])
        below_fails = enqueue({"name": "x"}, task="dag_node", after=[fails])
        below_below = enqueue({"name": "x"}, task="dag_node", after=[(below_fails, "cancel")])
        rescued = enqueue({"name": "rescued"}, task="dag_node", after=[(cancels, "run anyway")])
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
        # an operator's cancel of a queued parent ends its dependants too
        queued = enqueue({"name": "never"}, task="dag_node", queue="held")
        cancelled_child = enqueue({"name": "x"}, task="dag_node", after=[(queued, "cancel")])
        store.cancel_queued(ids=[queued], queue=None, task=None)
    s = _statuses(dsn)
    assert s[root] == ("failed", "PermanentError: node root fails")
    assert s[fails] == ("failed", f"parent job {root} failed: PermanentError: node root fails")
    assert s[cancels] == (
        "failed",
        f"cancelled: parent job {root} failed: PermanentError: node root fails",
    )
    assert s[anyway] == ("done", None)
    assert s[below_fails][0] == "failed"
    assert s[below_fails][1].startswith(f"parent job {fails} failed: parent job {root} failed")
    assert s[below_below][0] == "failed"
    assert s[below_below][1].startswith(f"cancelled: parent job {below_fails} failed")
    assert s[rescued] == ("done", None)
    assert s[cancelled_child] == (
        "failed",
        f"cancelled: parent job {queued} failed: cancelled by operator",
    )


def test_the_worker_completing_the_last_parent_kicks_the_dependants_queue(dsn: str) -> None:
    """One kick, for the other queue, sent by the worker whose complete released the job;
    none for a parent that still waits for another, none for jobs without dependants."""
    kicker = RecordingKicker()
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        first = enqueue({"name": "first"}, task="dag_node")
        second = enqueue({"name": "second"}, task="dag_node", queue="later")
        enqueue({"name": "plain"}, task="dag_node")
        child = enqueue({"name": "child"}, task="dag_node", queue="children", after=[first, second])
        worker = Worker(store, registry, kicker, WorkerOptions(heal=False))
        worker.drain("default", _forever)
        assert kicker.kicks == []  # `second` still runs: the child waits
        assert _statuses(dsn)[child][0] == "waiting"
        summary = worker.drain("later", _forever)
        assert kicker.kicks == [("children", "dependants", 1)]  # this invocation's hop + 1
        assert summary.dependant_kicks == 1
        assert _statuses(dsn)[child][0] == "queued"


def test_a_dependant_in_another_queue_runs_on_lambda_by_its_parents_kick(
    dsn: str, tmp_path: Path
) -> None:
    """The worker's kick for released dependants goes through the real Lambda handler (the
    dev stack's local Lambda): the handler must accept it. Before the fix it answered
    `reason 'dependants' is not one of [...]` and the child waited for good."""
    kicker = LocalKicker(
        env={"DATABASE_URL": dsn, "PGKICK_WORKER_LINGER_MS": "0", "POWERTOOLS_LOG_LEVEL": "INFO"},
        concurrency=2,
        output=tmp_path / "workers.log",
    )
    try:
        # one transaction: the child is waiting when the parent's kick is sent
        with psycopg.connect(dsn) as conn, pgkick.transaction(conn, kicker=kicker) as jobs:
            parent = jobs.enqueue({}, task="noop")
            child = jobs.enqueue({}, task="noop", queue="elsewhere", after=[parent])
        assert kicker.wait_idle(60)
    finally:
        kicker.close()
    assert _statuses(dsn)[child][0] == "done", (tmp_path / "workers.log").read_text()[-3000:]
    assert "rejected" not in (tmp_path / "workers.log").read_text()


def test_a_chain_of_dependants_across_two_queues_longer_than_16_hops_runs_to_its_end(
    dsn: str, tmp_path: Path
) -> None:
    """Each link's kick comes from the invocation that released it, so Lambda (and the
    stand-in, following where each kick came from) counts one chain across both queues and
    cuts its 17th invocation. Before the fix the dependants kick carried hop 0, so the
    worker never handed over: the 17th kick was dropped ('recursive loop detected') and
    the chain stalled. With the hop carried, past PGKICK_MAX_HOPS it books a wake-up."""
    kicker = LocalKicker(
        env={
            "DATABASE_URL": dsn,
            "PGKICK_WORKER_LINGER_MS": "0",
            "PGKICK_MAX_HOPS": "5",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        },
        concurrency=2,
        fast_scheduler=True,  # the labelled kindness: a hand-over's wake-up at the second
        output=tmp_path / "workers.log",
    )
    links = LOOP_LIMIT + 6
    try:
        with psycopg.connect(dsn) as conn, pgkick.transaction(conn, kicker=kicker) as jobs:
            chain = [jobs.enqueue({}, task="noop", queue="a")]
            for n in range(1, links):
                chain.append(jobs.enqueue({}, task="noop", queue="ab"[n % 2], after=[chain[-1]]))
        assert kicker.wait_idle(180, include_wakes=True)
    finally:
        kicker.close()
    log = (tmp_path / "workers.log").read_text()[-3000:]
    assert [k["why"] for k in kicker.stats.failed_kicks] == [], log
    s = _statuses(dsn)
    assert [s[job][0] for job in chain] == ["done"] * links, log


def test_a_ten_thousand_way_fan_out_then_fan_in_runs_the_join_once(
    dsn: str, tmp_path: Path
) -> None:
    """A task spawns 10,000 children and a join after them; three worker processes run
    them; the join runs once, with every child's result."""
    n = 10_000
    with worker_processes(dsn, tmp_path, ["default"], 3):
        spawner = pgkick.enqueue_and_kick({"n": n}, task="fan_out", dsn=dsn, kicker=NO_KICKS)
        statuses = _wait_final(dsn, 80)
    assert Counter(s for s, _ in statuses.values()) == {"done": n + 2}
    joins = [r for runs in _runs(tmp_path).values() for r in runs if r[0].startswith("join")]
    assert joins == [(f"join:{n}:{n * (n - 1) // 2}", joins[0][1], joins[0][2])]
    assert spawner in _runs(tmp_path)


def _count(dsn: str) -> int:
    """Rows in the jobs table, whatever their status (a cancelled child counts too)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone()
        assert row is not None
        return int(row[0])


def test_a_spawning_run_that_fails_writes_no_child_and_the_retry_spawns_once(dsn: str) -> None:
    """The children are written with the spawning job's completion: a run that spawned,
    then failed, leaves no child row at all (not even a cancelled one); the retry's
    children and join run, the join once."""
    with JobStore.open(dsn) as store:
        spawner = Enqueuer(store).enqueue({"n": 50, "fail_attempts": [1]}, task="fan_out")
        worker = Worker(store, registry, NO_KICKS, FAST_RETRY)
        # attempt 1 spawns 51 jobs, then fails; the retry (due 1 ms later) spawns again
        summary = worker.drain("default", _forever)
        assert (summary.retried, summary.done) == (1, 52)
        rows = store.rows(
            "SELECT task, status, count(*) FROM pgkick.jobs WHERE id <> %(id)s GROUP BY 1, 2",
            id=spawner,
        )
        result = store.rows(
            "SELECT status, result FROM pgkick.jobs WHERE task = 'fan_join' AND status = 'done'"
        )
    assert sorted(rows) == [("fan_child", "done", 50), ("fan_join", "done", 1)]
    assert result == [("done", sum(range(50)))]
    assert _count(dsn) == 52  # no row of attempt 1's children, cancelled or otherwise


def test_a_spawning_run_whose_lease_was_taken_over_writes_no_child(dsn: str) -> None:
    """The completion that would write the children is fenced by the attempt: after the
    spawn, the job's lease expires and another worker reaps and claims it (attempt 2);
    the first worker's complete then finds the job no longer its own and writes nothing,
    children included (the ids it reserved are gaps in the sequence)."""
    with JobStore.open(dsn) as store:
        spawner = Enqueuer(store).enqueue({"n": 20}, task="spawn_then")
    later = FakeClock(datetime.now(UTC) + timedelta(hours=1))  # past any lease

    def taken_over(job: pgkick.JobContext) -> None:
        with JobStore.open(dsn, later) as other:
            assert [j.id for j in other.reap_expired()] == [job.id]
            claimed = other.claim("default", batch=1, lease=timedelta(hours=1))
            assert [(j.id, j.attempts) for j in claimed] == [(job.id, 2)]

    tests.dependency_tasks.AFTER_SPAWN.append(taken_over)
    try:
        with JobStore.open(dsn) as store:
            summary = Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
    finally:
        tests.dependency_tasks.AFTER_SPAWN.clear()
    assert (summary.done, summary.lost) == (0, 1)
    assert _count(dsn) == 1
    assert [(job, s) for job, (s, _) in _statuses(dsn).items()] == [(spawner, "running")]


def test_a_completion_whose_children_cannot_be_written_rolls_back_and_fails_the_run(
    dsn: str,
) -> None:
    """The children's parent outside the fan-out is deleted between the spawn and the
    completion: their link fails in the completion's transaction, which rolls back (the
    job is not done, no child exists) and the worker records the run as failed, naming
    the cause, instead of raising."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        parent = enqueue({}, task="noop", queue="elsewhere")
        spawner = enqueue({"n": 3, "parent": parent}, task="spawn_then", max_attempts=1)

    def parent_purged(job: pgkick.JobContext) -> None:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("DELETE FROM pgkick.jobs WHERE id = %s", (parent,))

    tests.dependency_tasks.AFTER_SPAWN.append(parent_purged)
    try:
        with JobStore.open(dsn) as store:
            summary = Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
    finally:
        tests.dependency_tasks.AFTER_SPAWN.clear()
    assert (summary.done, summary.failed) == (0, 1)
    assert _count(dsn) == 1
    status, error = _statuses(dsn)[spawner]
    assert status == "failed"
    assert error is not None and error.startswith("spawn: ForeignKeyViolation: pgkick: parent job")


def test_a_spawning_run_that_sleeps_writes_its_children_once_when_it_completes(
    dsn: str,
) -> None:
    """job.sleep after a spawn ends the run: nothing written; the replay spawns again and
    its completion writes the children, once."""
    clock = FakeClock(datetime.now(UTC))
    with JobStore.open(dsn, clock) as store:
        spawner = Enqueuer(store).enqueue({"n": 5, "sleep": 60}, task="spawn_then")
        worker = Worker(store, registry, NO_KICKS, FAST_RETRY)
        assert worker.drain("default", _forever).snoozed == 1
        assert _count(dsn) == 1
        clock.advance(61)
        summary = worker.drain("default", _forever)
        joined = store.rows("SELECT result FROM pgkick.jobs WHERE task = 'fan_join'")
    assert summary.done == 7  # the spawner, its 5 children and the join
    assert _count(dsn) == 7
    assert joined == [(sum(range(5)),)]
    assert _statuses(dsn)[spawner] == ("done", None)


def test_spawned_children_are_kicked_after_the_commit_or_woken_when_delayed(dsn: str) -> None:
    """Children due now in another queue: one kick ("dependants", the worker's hop + 1)
    once the completion committed; delayed children: a wake-up for their queue, no kick."""
    kicker = RecordingKicker()
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        enqueue({"n": 3, "queue": "kids"}, task="spawn_then")
        enqueue({"n": 3, "queue": "later", "delay": 3600}, task="spawn_then")
        summary = Worker(store, registry, kicker, FAST_RETRY).drain("default", _forever)
    assert summary.done == 2
    assert kicker.kicks == [("kids", "dependants", 1)]
    assert kicker.wakes == ["later"]
    statuses = Counter(s for s, _ in _statuses(dsn).values())
    assert statuses == {"done": 2, "queued": 6, "waiting": 2}


def test_a_workers_kick_for_released_dependants_is_followed_by_its_safety(dsn: str) -> None:
    """Catches (a review) the released dependants' kick sent with no safety wake-up: the
    worker's own sweep trusts the kick it reserved, so a kick Lambda accepted and lost left
    the child to another worker's sweep or the daily reaper."""
    kicker = RecordingKicker()
    options = WorkerOptions(heal=False, backoff=timedelta(0), backoff_cap=None,
                            kick_safety=timedelta(minutes=1))  # fmt: skip
    with JobStore.open(dsn) as store:
        Enqueuer(store).enqueue({"n": 2, "queue": "kids"}, task="spawn_then")
        Worker(store, registry, kicker, options).drain("default", _forever)
    assert kicker.kicks == [("kids", "dependants", 1)]
    assert kicker.wakes == ["kids"]


def test_spawned_children_due_now_are_kicked_by_a_worker_whose_clock_is_behind(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The children's run_at is the server's clock; the worker asked its own whether they
    were due. Catches: a worker clock 50 ms behind the server's booked a wake-up for
    children due at once (Scheduler's next minute) and sent no kick."""

    class Behind(datetime):
        @classmethod
        def now(cls, tz: object = None) -> datetime:
            return datetime.now(tz) - timedelta(milliseconds=50)  # type: ignore[arg-type]

    monkeypatch.setattr("pgkick.worker.outcomes.datetime", Behind)
    kicker = RecordingKicker()
    with JobStore.open(dsn) as store:
        Enqueuer(store).enqueue({"n": 2, "queue": "kids"}, task="spawn_then")
        Worker(store, registry, kicker, FAST_RETRY).drain("default", _forever)
    assert kicker.kicks == [("kids", "dependants", 1)]


def test_the_worker_role_spawns_with_reserved_ids_and_joins(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811  (the fixture imported above)
) -> None:
    """As pgkick_worker (a login role in it, no more): the id reservation (USAGE on the
    jobs' sequence), the insert with those ids (INSERT on id, rate_key) and the links.
    Catches a grant missing from role_setup."""
    with JobStore.open(dsn) as admin:
        Enqueuer(admin).enqueue({"n": 20}, task="spawn_then")
    with JobStore.open(login_as["worker"]) as worker:
        summary = Worker(worker, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
    assert summary.done == 22
    assert Counter(s for s, _ in _statuses(dsn).values()) == {"done": 22}


def test_bad_spawns_are_refused_at_the_call_before_anything_is_written(dsn: str) -> None:
    """A unique key, a debounce, an unknown parent, a bad job anywhere in a spawn_many, a
    spawn inside a step: each raises in the task, at the call; no row is written and no
    id is even reserved."""
    with JobStore.open(dsn) as store:
        job = Enqueuer(store).enqueue({"missing": 10**9}, task="spawn_badly")
        (last_id,) = store.one("SELECT last_value FROM pgkick.jobs_id_seq")
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
        (said,) = store.one("SELECT result FROM pgkick.jobs WHERE id = %(id)s", id=job)
        assert store.one("SELECT last_value FROM pgkick.jobs_id_seq") == (last_id,)
    assert _count(dsn) == 1
    assert said[0].startswith("InvalidArgument: spawn: jobs[0]: unique_key cannot be used")
    assert said[1].startswith("InvalidArgument: spawn: jobs[0]: debounce cannot be used")
    assert said[2].startswith(f"UnknownParent: after: no job {10**9} in schema 'pgkick'")
    assert said[3].startswith("InvalidArgumentType: jobs[1]: unknown fields ['x']")
    assert said[4].startswith("MisuseError: spawn: not inside job.step")
    assert len(said) == 5


def test_bad_dependencies_are_refused_before_anything_is_written(dsn: str) -> None:
    with JobStore.open(dsn) as store:
        parent = Enqueuer(store).enqueue({}, task="noop")
        next_id = parent + 1  # the id the refused job would get: asking for itself
    before = _statuses(dsn)
    cases: list[tuple[object, type[Exception], str]] = [
        ([parent + 10], UnknownParent, f"no job {parent + 10} in schema 'pgkick'"),
        ([next_id], UnknownParent, f"no job {next_id}"),
        ([(parent, "retry")], InvalidArgument, "unknown policy 'retry'"),
        ([(parent, "fail"), (parent, "cancel")], InvalidArgument, "given twice"),
        (["1"], InvalidArgumentType, "must be a job id"),
        ([0], InvalidArgument, "job ids are 1 to 9223372036854775807, got 0"),
        ([2**63], InvalidArgument, "job ids are 1 to"),  # was the server's bare range error
        (parent, InvalidArgumentType, "must be a list"),
    ]
    for after, error, words in cases:
        with pytest.raises(error, match=words):
            pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NO_KICKS, after=after)
        with pytest.raises(error, match=words):
            pgkick.enqueue_many(
                [{"payload": {}, "task": "noop"}, {"payload": {}, "task": "noop", "after": after}],
                dsn=dsn,
                kicker=NO_KICKS,
            )
        with psycopg.connect(dsn) as conn:
            with pytest.raises(error, match=words), pgkick.transaction(conn, kicker=NO_KICKS) as j:
                j.enqueue({}, task="noop")
                j.enqueue({}, task="noop", after=after)
        with pytest.raises(error, match=words):
            asyncio.run(
                aio.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NO_KICKS, after=after)
            )
        with pytest.raises(error, match=words):
            asyncio.run(
                aio.enqueue_many(
                    [
                        {"payload": {}, "task": "noop"},
                        {"payload": {}, "task": "noop", "after": after},
                    ],
                    dsn=dsn,
                    kicker=NO_KICKS,
                )
            )
    assert _statuses(dsn) == before  # nothing written, not even the batch's other job


def test_a_parent_in_another_schema_is_refused(dsn: str) -> None:
    """Job ids are per schema (PGKICK_SCHEMA): a parent enqueued in one means nothing in
    another, and is refused naming the schema, before the child is written."""
    with JobStore.open(dsn) as store:
        parent = Enqueuer(store).enqueue({}, task="noop")
    with Database.open(dsn, schema="tenant") as db:
        migrate(db)
    with psycopg.connect(dsn, autocommit=True) as conn:
        tenant = ProducerStore(conn, schema="tenant")
        with pytest.raises(UnknownParent, match=f"no job {parent} in schema 'tenant'"):
            Enqueuer(tenant).enqueue({}, task="noop", after=[parent])
        assert conn.execute("SELECT count(*) FROM tenant.jobs").fetchone() == (0,)


def test_pgkick_job_shows_parents_and_dependants_and_jobs_lists_the_waiting(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        first, second = enqueue({}, task="noop"), enqueue({}, task="noop")
        child = enqueue({}, task="noop", after=[first, (second, "run anyway")])
    assert main(["job", str(child), "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert f"job {child}: waiting" in out
    assert f"after: {first}, {second}" in out and "waiting on: 2 parents" in out
    assert main(["job", str(first), "--dsn", dsn]) == 0
    assert f"dependants: {child}" in capsys.readouterr().out
    assert main(["jobs", "--status", "waiting", "--dsn", dsn, "--json"]) == 0
    assert f'"id": {child}' in capsys.readouterr().out
    with ui_client(make_app(dsn)) as ui:  # the dashboard's job page links both ways
        page = ui.get(f"/jobs/{child}").text
        assert f'<a href="/jobs/{first}">{first}</a>, <a href="/jobs/{second}">' in page
        assert "(waiting on 2)" in page
        assert f'<a href="/jobs/{child}">{child}</a>' in ui.get(f"/jobs/{first}").text


def test_a_worker_killed_mid_fan_out_leaves_no_child_row_and_the_retry_joins_once(
    dsn: str, tmp_path: Path
) -> None:
    """SIGKILL after the spawn returned, before the spawning job completed: not one child
    row exists (their ids were reserved, nothing written); the reaper re-queues the job,
    the retry spawns again, and its children and join run, the join once."""
    with JobStore.open(dsn) as store:
        spawner = Enqueuer(store).enqueue({"n": 200, "hang_attempts": [1]}, task="fan_out")
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "PGKICK_TEST_RECORD": str(tmp_path),
        "PGKICK_TEST_STOP": str(tmp_path / "stop"),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen([sys.executable, "-m", "tests.dependency_worker", "default"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not any(r[0] == "spawned" for rs in _runs(tmp_path).values() for r in rs):
            assert time.monotonic() < deadline, "the spawning task never got past its spawn"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert [(job, s) for job, (s, _) in _statuses(dsn).items()] == [(spawner, "running")]
    later = FakeClock(datetime.now(UTC) + timedelta(minutes=5))  # past the 30 s lease
    with JobStore.open(dsn, later) as reaper:
        assert [job.id for job in reaper.reap_expired()] == [spawner]
    assert _count(dsn) == 1
    with JobStore.open(dsn) as store:
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
        joined = store.rows(
            "SELECT result FROM pgkick.jobs WHERE task = 'fan_join' AND status = 'done'"
        )
    assert joined == [(sum(range(200)),)]
    assert Counter(s for s, _ in _statuses(dsn).values()) == {"done": 202}


def test_the_asyncio_forms_link_their_jobs_to_parents_too(dsn: str) -> None:
    async def enqueue() -> tuple[int, int, int, int]:
        first = await aio.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NO_KICKS)
        second = await aio.enqueue_and_kick(
            {}, task="noop", dsn=dsn, kicker=NO_KICKS, after=[first]
        )
        (third,) = await aio.enqueue_many(
            [{"payload": {}, "task": "noop", "after": {first: "cancel", second: "fail"}}],
            dsn=dsn,
            kicker=NO_KICKS,
        )
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=NO_KICKS) as jobs:
                fourth = await jobs.enqueue({}, task="noop", after=[(third, "run anyway")])
        return first, second, third, fourth

    first, second, third, fourth = asyncio.run(enqueue())
    statuses = _statuses(dsn)
    assert [statuses[j][0] for j in (first, second, third, fourth)] == [
        "queued",
        "waiting",
        "waiting",
        "waiting",
    ]
    with JobStore.open(dsn) as store:
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
    assert {_statuses(dsn)[j][0] for j in (first, second, third, fourth)} == {"done"}


def test_pgkick_cancel_by_id_and_by_filter_fails_waiting_jobs_and_their_dependants_follow(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiting job is neither queued nor running: before the fix `pgkick cancel ID` left it
    waiting (and the filter form refused `--status waiting`), so its dependants waited too.
    Cancelled, its waiting_on count is cleared and the trigger settles its dependants, and
    the queue a "run anyway" dependant entered is kicked (it waited for a sweep or the
    reaper: nobody kicked it)."""
    kicker = RecordingKicker()
    monkeypatch.setattr("pgkick.kick.default._default", kicker)
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        root = enqueue({}, task="noop", queue="held")
        waiting = enqueue({}, task="noop", queue="held", after=[root])
        fails = enqueue({}, task="noop", queue="held", after=[(waiting, "fail")])
        anyway = enqueue({}, task="noop", queue="held", after=[(waiting, "run anyway")])
        by_filter = enqueue({}, task="noop", queue="filtered", after=[root])
        below = enqueue({}, task="noop", queue="held", after=[(by_filter, "cancel")])
    assert main(["cancel", str(waiting), "--dsn", dsn, "--json"]) == 0
    assert f"{waiting}" in capsys.readouterr().out
    s = _statuses(dsn)
    assert s[waiting] == ("failed", "cancelled by operator")
    assert s[fails] == ("failed", f"parent job {waiting} failed: cancelled by operator")
    assert s[anyway] == ("queued", None)  # released: its only parent ended
    assert kicker.kicks == [("held", "dependants", 0)]  # and its queue kicked
    argv = ["cancel", "--queue", "filtered", "--status", "waiting", "--yes", "--dsn", dsn]
    assert main(argv) == 0
    assert kicker.kicks == [("held", "dependants", 0)]  # its dependant was cancelled: no kick
    s = _statuses(dsn)
    assert s[by_filter] == ("failed", "cancelled by operator")
    cancelled = f"cancelled: parent job {by_filter} failed: cancelled by operator"
    assert s[below] == ("failed", cancelled)
    assert s[root][0] == "queued"


def test_a_waiting_job_holds_its_unique_key_against_plain_debounced_and_retried_enqueues(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix the live-key index covered queued and running jobs only: a second
    enqueue of a waiting job's key inserted a second live job beside it."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        old = enqueue({"v": 0}, task="noop", queue="held", unique_key="k")
        store.cancel_queued(ids=[old], queue=None, task=None)  # a failed job with the key
        parent = enqueue({}, task="noop", queue="held")
        waiting = enqueue({"v": 1}, task="noop", queue="held", unique_key="k", after=[parent])
        assert _statuses(dsn)[waiting][0] == "waiting"
        assert enqueue({"v": 2}, task="noop", queue="held", unique_key="k") == waiting
        assert Enqueuer(store).enqueue_many(
            [{"payload": {"v": 3}, "task": "noop", "queue": "held", "unique_key": "k"}]
        ) == [waiting]
        debounced = enqueue({"v": 4}, task="noop", queue="held", unique_key="k", debounce=60)
        assert debounced == waiting
        throttled = enqueue({"v": 5}, task="noop", queue="held", unique_key="k", throttle=60)
        assert throttled == waiting
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT id, status, payload FROM pgkick.jobs WHERE unique_key = 'k' ORDER BY id"
        ).fetchall() == [(old, "failed", {"v": 0}), (waiting, "waiting", {"v": 4})]
    assert main(["retry", str(old), "--dsn", dsn]) == 1  # the waiting job holds the key
    assert f"job {waiting}" in capsys.readouterr().err


def test_a_key_repeated_in_a_batch_links_only_its_first_jobs_parents(dsn: str) -> None:
    """Catches the batch's later job with a key (a skipped duplicate: answered with the
    first's id) linking its own parents to the first's job, which then waited for parents
    it was never given. The async form shares the pairing (dependencies.new_pairs)."""
    first, second = (
        pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker()) for _ in range(2)
    )
    ids = pgkick.enqueue_many(
        [
            {"payload": {}, "task": "noop", "unique_key": "r", "after": [first]},
            {"payload": {}, "task": "noop", "unique_key": "r", "after": [second]},
            {"payload": {}, "task": "noop", "unique_key": "s"},
            {"payload": {}, "task": "noop", "unique_key": "s", "after": [second]},
        ],
        dsn=dsn,
        kicker=NoKicker(),
    )
    assert ids[0] == ids[1] and ids[2] == ids[3]
    with psycopg.connect(dsn) as conn:
        links = conn.execute(
            "SELECT child_id, parent_id FROM pgkick.job_dependencies ORDER BY 1, 2"
        ).fetchall()
    assert links == [(ids[0], first)]


def test_a_finished_parent_is_not_purged_while_its_dependant_waits(dsn: str) -> None:
    """Catches retention deleting a done parent whose dependant still waited for another:
    the link went with it (ON DELETE CASCADE), and the join's parent_results() silently
    lacked that parent's result when it finally ran. Neither the reaper's purge nor a bulk
    purge by filter takes it now; once the join ran, the next purge takes them all."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        fast = enqueue({"i": 1}, task="fan_child")
        slow = enqueue({"i": 2}, task="fan_child", queue="slow")  # a backlogged queue, say
        join = enqueue({"n": 2}, task="fan_join", after=[fast, slow])
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
    assert _statuses(dsn)[fast][0] == "done" and _statuses(dsn)[join][0] == "waiting"
    later = datetime.now(UTC) + timedelta(days=8)
    with JobStore.open(dsn, lambda: later) as reaper:
        assert reaper.purgeable_count(timedelta(days=7)) == {}
        assert reaper.purge_finished(timedelta(days=7)) == 0
    assert main(["purge", "--task", "fan_child", "--yes", "--dsn", dsn]) == 0
    assert fast in _statuses(dsn)
    with JobStore.open(dsn) as store:
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("slow", _forever)
        Worker(store, registry, NO_KICKS, FAST_RETRY).drain("default", _forever)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT status, result FROM pgkick.jobs WHERE id = %s", (join,))
        assert row.fetchone() == ("done", 3)  # both parents' results
    with JobStore.open(dsn, lambda: later) as reaper:
        assert reaper.purge_finished(timedelta(days=7)) == 3
