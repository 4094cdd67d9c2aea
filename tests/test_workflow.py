"""pgkick.Workflow (issue 34 item 3): a DAG built in Python, checked whole, enqueued in one
transaction on top of `after=`, and shown as one unit by `pgkick workflow ID`.

The diamonds run in worker processes (tests/dependency_worker.py, the real Worker loop);
the CLI's view drives the worker in-process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgkick
from pgkick import aio
from pgkick.cli.main import main
from pgkick.errors import InvalidArgument, InvalidArgumentType, InvalidWorkflow
from pgkick.kick.kickers import NoKicker
from pgkick.producer.enqueue import Enqueuer
from pgkick.tasks.registry import registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.ui.app import make_app
from tests.dependency_tasks import dag_node
from tests.store import JobStore
from tests.test_dashboard import client as ui_client
from tests.test_dependencies import _runs, _statuses, _wait_final, worker_processes
from tests.test_watch import RecordingKicker

NO_KICKS = NoKicker()


def _diamond(name: str) -> tuple[pgkick.Workflow, list[Any]]:
    """a; b (queue other) and c after a; d after b and c."""
    wf = pgkick.Workflow()
    a = wf.add(dag_node, {"name": f"a{name}", "sleep": 0.002})
    b = wf.add("dag_node", {"name": f"b{name}", "sleep": 0.002}, queue="other", after=[a])
    c = wf.add(dag_node, {"name": f"c{name}", "sleep": 0.002}, after=[(a, "fail")])
    d = wf.add(dag_node, {"name": f"d{name}"}, after={b: "fail", c: "fail"})
    return wf, [a, b, c, d]


def test_a_diamond_built_as_a_workflow_runs_each_node_once_after_its_parents(
    dsn: str, tmp_path: Path
) -> None:
    """10 diamonds, each one Workflow.enqueue (5 of them into the app's own transaction):
    only the roots are queued and kicked, the rest wait; then two worker processes drain
    both queues, and every node runs once, after its parents."""
    kicker = RecordingKicker()
    parents: dict[int, list[int]] = {}
    for n in range(10):
        wf, (a, b, c, d) = _diamond(str(n))
        if n % 2:
            run = wf.enqueue(dsn=dsn, kicker=kicker)
        else:
            with psycopg.connect(dsn) as conn, pgkick.transaction(conn, kicker=kicker) as jobs:
                run = wf.enqueue_with(jobs)
        assert run.id == run[a] == min(run.job_ids)
        parents.update({run[a]: [], run[b]: [run[a]], run[c]: [run[a]]})
        parents[run[d]] = [run[b], run[c]]
    waiting = {job for job, of in parents.items() if of}
    assert {j: s for j, (s, _) in _statuses(dsn).items()} == {
        job: "waiting" if job in waiting else "queued" for job in parents
    }
    assert {queue for queue, _, _ in kicker.kicks} == {"default"}  # the roots' queue only
    with worker_processes(dsn, tmp_path, ["default", "other"], 2):
        statuses = _wait_final(dsn, 60)
    assert {s for s, _ in statuses.values()} == {"done"}, statuses
    runs = _runs(tmp_path)
    assert sorted(runs) == sorted(parents)
    assert all(len(r) == 1 for r in runs.values()), {j: r for j, r in runs.items() if len(r) > 1}
    for job, of in parents.items():
        assert all(runs[p][0][2] <= runs[job][0][1] for p in of), (job, of)


def test_a_bad_workflow_is_refused_before_anything_is_written(dsn: str) -> None:
    foreign = pgkick.Workflow().add("dag_node", {"name": "x"})
    wf = pgkick.Workflow()
    with pytest.raises(InvalidWorkflow, match="no node"):
        wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    a = wf.add("dag_node", {"name": "a"})
    with pytest.raises(InvalidWorkflow, match="node of another workflow"):
        wf.add("dag_node", {}, after=[foreign])
    with pytest.raises(InvalidWorkflow, match="unknown policy 'ignore'"):
        wf.add("dag_node", {}, after=[(a, "ignore")])
    with pytest.raises(InvalidWorkflow, match="given twice"):
        wf.add("dag_node", {}, after=[(a, "fail"), (a, "cancel")])
    with pytest.raises(InvalidArgumentType, match="is not a node"):
        wf.add("dag_node", {}, after=[1])
    with pytest.raises(InvalidWorkflow, match="unique_key= is not taken"):
        wf.add("dag_node", {}, after=[a], unique_key="k")
    with pytest.raises(InvalidArgument, match="priority"):
        wf.add("dag_node", {}, after=[a], priority=1000)
    with pytest.raises(InvalidArgumentType):
        wf.add("dag_node", {"not json": object()}, after=[a])
    wf.add("dag_node", {"name": "b"}, after=[a])
    wf.add("dag_node", {"name": "alone"})  # added fine; linked to nothing
    assert len(wf) == 3  # the refused adds left no node behind
    with pytest.raises(InvalidWorkflow, match=r"node 2 \(dag_node\) is linked to no path"):
        wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    with psycopg.connect(dsn) as conn:
        with pytest.raises(InvalidWorkflow), pgkick.transaction(conn, kicker=NO_KICKS) as jobs:
            wf.enqueue_with(jobs)
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


def test_a_node_pair_given_as_a_list_is_taken_as_after_ids_pairs_are(dsn: str) -> None:
    """Catches `after=[[node, "cancel"]]` refused as "is not a node" where `after=` with
    job ids takes `[id, policy]` lists (JSON gives pairs as lists)."""
    wf = pgkick.Workflow()
    a = wf.add("dag_node", {"name": "a"})
    b = wf.add("dag_node", {"name": "b"}, after=[[a, "cancel"]])
    run = wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    with psycopg.connect(dsn) as conn:
        links = conn.execute("SELECT child_id, parent_id, policy FROM pgkick.job_dependencies")
        assert links.fetchall() == [(run[b], run[a], "cancel")]


def test_pgkick_workflow_lists_its_jobs_states_and_critical_path(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From any of its jobs' ids; a job enqueued later after one of its nodes is not part
    of it. Unfinished, the critical path is the longest chain, through the jobs left."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    wf = pgkick.Workflow()
    a = wf.add(dag_node, {"name": "a"})
    b = wf.add(dag_node, {"name": "b"}, after=[a])
    c = wf.add(dag_node, {"name": "c"}, queue="later", after=[a])
    d = wf.add(dag_node, {"name": "d"}, after=[b, c])
    run = wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    with JobStore.open(dsn) as store:
        outsider = Enqueuer(store).enqueue({"name": "x"}, task="dag_node", after=[run[a]])
        worker = Worker(store, registry, NO_KICKS, WorkerOptions(heal=False))
        worker.drain("default", lambda: 60_000)  # a, b and the outsider; c waits in 'later'
        assert main(["workflow", str(run[d]), "--dsn", dsn]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0] == f"workflow {run.id}: 4 jobs (2 done, 1 queued, 1 waiting)"
        listed = {line.split()[0]: line.split()[1:3] for line in out.splitlines()[2:-1]}
        assert listed == {
            str(run[a]): ["done", "dag_node"],
            str(run[b]): ["done", "dag_node"],
            str(run[c]): ["queued", "dag_node"],
            str(run[d]): ["waiting", "dag_node"],
        }
        assert str(outsider) not in listed
        assert out.splitlines()[-1] == (
            f"critical path (links, unfinished): {run[a]} -> {run[c]} -> {run[d]}"
        )
        with ui_client(make_app(dsn)) as ui:  # the dashboard shows the same workflow
            page = ui.get(f"/workflows/{run[b]}").text
            assert f'<a href="/jobs/{run[d]}">{run[d]}</a>' in page
            assert "4 jobs: 2 done, 1 queued, 1 waiting" in page
            assert f'href="/workflows/{run[d]}"' in ui.get(f"/jobs/{run[d]}").text
        worker.drain("later", lambda: 60_000)
        worker.drain("default", lambda: 60_000)
    assert main(["workflow", str(run.id), "--dsn", dsn, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["statuses"] == {"done": 4}
    assert [job["parents"] for job in shown["jobs"]] == [
        [],
        [run[a]],
        [run[a]],
        sorted([run[b], run[c]]),
    ]
    path = shown["critical_path"]
    assert path["by"] == "durations" and path["ids"][0] == run[a] and path["ids"][-1] == run[d]
    assert _statuses(dsn)[outsider][0] == "done"
    assert (
        main(["workflow", "999999", "--dsn", dsn]) == 1
    )  # no such job: refused as it stands, as `pgkick job`


def test_a_finished_workflow_with_a_node_that_never_ran_has_its_path_by_durations(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick workflow` calling a finished workflow unfinished (path by links, no
    seconds) when a node never ran: failed by its parent's failure, it has no claim, so no
    run time. Every job finished: the path is by durations, a job that never ran 0 s."""
    wf = pgkick.Workflow()
    a = wf.add(dag_node, {"name": "a"})
    b = wf.add(dag_node, {"name": "b", "fail": True}, after=[a])
    c = wf.add(dag_node, {"name": "c"}, after=[(b, "cancel")])
    run = wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    with JobStore.open(dsn) as store:
        Worker(store, registry, NO_KICKS, WorkerOptions(heal=False)).drain(
            "default", lambda: 60_000
        )
    assert [_statuses(dsn)[run[n]][0] for n in (a, b, c)] == ["done", "failed", "failed"]
    assert main(["workflow", str(run.id), "--dsn", dsn, "--json"]) == 0
    path = json.loads(capsys.readouterr().out)["critical_path"]
    assert path["by"] == "durations"
    assert path["ids"] == [run[a], run[b], run[c]] and path["seconds"] >= 0
    assert main(["workflow", str(run.id), "--dsn", dsn]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .endswith(f"s of runs): {run[a]} -> {run[b]} -> {run[c]}")
    )


def test_a_failure_between_two_levels_leaves_no_job_of_the_workflow(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The levels share one transaction: the connection lost (here: an error injected)
    while the second level is sent rolls back the first."""
    real = Enqueuer.enqueue_many
    calls: list[int] = []

    def second_level_fails(self: Enqueuer, jobs: Any) -> list[int]:
        calls.append(1)
        if len(calls) == 2:
            raise psycopg.OperationalError("injected: the connection dropped")
        return real(self, jobs)

    monkeypatch.setattr(Enqueuer, "enqueue_many", second_level_fails)
    wf, _ = _diamond("x")
    with pytest.raises(psycopg.OperationalError, match="injected"):
        wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    assert calls == [1, 1]
    assert _statuses(dsn) == {}


def test_a_node_keeps_the_payload_add_checked_and_a_level_refused_leaves_no_node(
    dsn: str,
) -> None:
    """Catches Workflow.add keeping the caller's payload object: a loop reusing one dict
    wrote its last value for every node, and a payload made invalid after its add failed at
    enqueue naming `jobs[0]`, its roots already written in the app's transaction (no
    savepoint spanned the levels), so an app that caught it committed half a workflow.
    Now add keeps the value it checked; a level the sink refuses (here: a tighter payload
    limit) raises naming the node, and the levels before it are rolled back, in both forms."""
    wf = pgkick.Workflow()
    root = wf.add("dag_node", {"name": "root"})
    payload: dict[str, Any] = {"name": None}
    for size in ("small", "medium", "large"):
        payload["name"] = size
        wf.add("dag_node", payload, after=[root])
    payload["blob"] = object()  # not JSON any more: add checked it before
    run = wf.enqueue(dsn=dsn, kicker=NO_KICKS)
    with psycopg.connect(dsn) as conn:
        written = conn.execute(
            "SELECT payload FROM pgkick.jobs WHERE id = ANY(%s) ORDER BY id", (list(run.job_ids),)
        ).fetchall()
    assert [row[0]["name"] for row in written] == ["root", "small", "medium", "large"]

    wf = pgkick.Workflow()
    root = wf.add("dag_node", {"name": "root"})
    wf.add("dag_node", {"name": "x" * 300}, after=[root])
    with psycopg.connect(dsn) as conn:
        with pgkick.transaction(conn, kicker=NO_KICKS) as jobs:
            jobs.max_payload_bytes = 200  # the sink's own limit, tighter than add's
            with pytest.raises(InvalidArgument, match=r"^workflow node 1 \(dag_node\): payload"):
                wf.enqueue_with(jobs)
            assert jobs.queued == []  # the root rolled back is not kicked either
            unrelated = jobs.enqueue({"name": "unrelated"}, task="dag_node")

        async def in_asyncio() -> None:
            async with await psycopg.AsyncConnection.connect(dsn) as conn:
                async with aio.transaction(conn, kicker=NO_KICKS) as jobs:
                    jobs.max_payload_bytes = 200
                    with pytest.raises(InvalidArgument, match=r"^workflow node 1 \(dag_node\)"):
                        await wf.enqueue_with_async(jobs)
                    assert jobs.queued == []

        asyncio.run(in_asyncio())
    assert set(_statuses(dsn)) == {*run.job_ids, unrelated}


def test_the_asyncio_forms_enqueue_a_workflow_in_one_transaction_and_kick_the_roots(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`await wf.enqueue_async(...)` and `await wf.enqueue_with_async(jobs)` inside
    `pgkick.aio.transaction(conn)`: only the roots queued and kicked, the rest waiting, all
    of one workflow (one created_at: one transaction); a failure between two levels, or the
    app's transaction rolled back, leaves no job of it."""
    kicker = RecordingKicker()

    async def enqueue() -> tuple[pgkick.WorkflowRun, pgkick.WorkflowRun]:
        wf, _ = _diamond("own")
        own = await wf.enqueue_async(dsn=dsn, kicker=kicker)
        wf, _ = _diamond("app")
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                app = await wf.enqueue_with_async(jobs)
            with pytest.raises(ZeroDivisionError):
                async with aio.transaction(conn, kicker=kicker) as jobs:
                    await _diamond("rolled back")[0].enqueue_with_async(jobs)
                    1 / 0  # noqa: B018
        return own, app

    own, app = asyncio.run(enqueue())
    statuses = _statuses(dsn)
    for run in (own, app):
        assert [statuses[job][0] for job in run.job_ids] == [
            "queued",
            "waiting",
            "waiting",
            "waiting",
        ]
        with psycopg.connect(dsn) as conn:
            created = conn.execute(
                "SELECT count(DISTINCT created_at) FROM pgkick.jobs WHERE id = ANY(%s)",
                (list(run.job_ids),),
            ).fetchone()
        assert created == (1,)
    assert len(statuses) == 8
    assert {queue for queue, _, _ in kicker.kicks} == {"default"}  # the roots' queue only
    kicks = len(kicker.kicks)

    real = aio.AsyncEnqueuer.enqueue_many
    calls: list[int] = []

    async def second_level_fails(self: aio.AsyncEnqueuer, jobs: Any) -> list[int]:
        calls.append(1)
        if len(calls) == 2:
            raise psycopg.OperationalError("injected: the connection dropped")
        return await real(self, jobs)

    monkeypatch.setattr(aio.AsyncEnqueuer, "enqueue_many", second_level_fails)
    with pytest.raises(psycopg.OperationalError, match="injected"):
        asyncio.run(_diamond("x")[0].enqueue_async(dsn=dsn, kicker=kicker))
    assert calls == [1, 1] and len(_statuses(dsn)) == 8 and len(kicker.kicks) == kicks
