"""Retrying a failed job revives the dependants its failure ended (issue 34, migration 0019):
`pgkick retry` by id and by filter, the dashboard's button and the Python API put the
failed or cancelled dependants back to waiting, transitively, so the rest of the DAG runs.

The worker runs in-process on its real code path (Worker.drain); the commands go through
the real CLI entry point, the button through the dashboard's app."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tests.dependency_tasks  # noqa: F401  dag_node, fan_out, fan_child, fan_join
from pgkick.cli import operations
from pgkick.cli.main import main
from pgkick.kick.kickers import NoKicker
from pgkick.producer.enqueue import Enqueuer
from pgkick.store.operator import OperatorStore
from pgkick.tasks.registry import registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.ui.app import make_app
from tests.helpers import FakeClock
from tests.store import JobStore
from tests.test_dashboard import LOCAL
from tests.test_dashboard import client as ui_client
from tests.test_security import login_as  # noqa: F401  (a fixture)

NO_KICKS = NoKicker()
OPTIONS = WorkerOptions(heal=False)


def _forever() -> int:
    return 60_000


@pytest.fixture(autouse=True)
def recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Each dag_node run leaves a line in tmp_path (tests.dependency_tasks); no kicks."""
    monkeypatch.setenv("PGKICK_TEST_RECORD", str(tmp_path))
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)
    return tmp_path


def _runs(folder: Path) -> list[str]:
    """The names of the dag_node runs, in the order they ran (one process)."""
    lines = [line.split() for p in folder.glob("*.runs") for line in p.read_text().splitlines()]
    return [name for _, name, _, _ in sorted(lines, key=lambda line: int(line[3]))]


def _jobs(dsn: str) -> dict[int, tuple[str, int, datetime | None, str | None]]:
    """id -> (status, waiting_on, finished_at, last_error)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, status, waiting_on, finished_at, last_error FROM pgkick.jobs"
        ).fetchall()
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}


def _drain(store: JobStore, queue: str = "default") -> None:
    Worker(store, registry, NO_KICKS, OPTIONS).drain(queue, _forever)


def _node(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, **more}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pgkick_retry_of_a_failed_chain_head_runs_the_whole_chain_once_in_order(
    dsn: str, recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A -> B -> C, A fails for good on its first attempt: B fails by propagation, C by
    B's. Before 0019, `pgkick retry A` ran A alone and B and C stayed failed forever."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        a = enqueue(_node("a", fail_attempts=[1]), task="dag_node", max_attempts=1)
        b = enqueue(_node("b"), task="dag_node", after=[a])
        c = enqueue(_node("c"), task="dag_node", after=[(b, "cancel")])
        _drain(store)
        jobs = _jobs(dsn)
        assert (
            jobs[b][0] == "failed"
            and jobs[b][3] == f"parent job {a} failed: PermanentError: node a fails"
        )
        because = f"parent job {a} failed: PermanentError: node a fails"
        assert jobs[c][3] == f"cancelled: parent job {b} failed: {because}"

        out = _cli(capsys, "retry", str(a), "--dsn", dsn)
        assert out == {"retried": [a], "revived_dependants": 2}
        jobs = _jobs(dsn)
        assert jobs[a][:3] == ("queued", 0, None)
        # Waiting again, each on its one parent; finished_at cleared, last_error kept (as
        # the retried job's own: why it had failed).
        assert jobs[b][:3] == ("waiting", 1, None) and jobs[c][:3] == ("waiting", 1, None)
        assert jobs[c][3] is not None and jobs[c][3].startswith("cancelled: parent job")

        _drain(store)
    assert {job: status for job, (status, *_) in _jobs(dsn).items()} == {
        a: "done",
        b: "done",
        c: "done",
    }
    assert _runs(recorded) == ["a", "a", "b", "c"]  # a's failed attempt, then each once


def test_a_retried_run_anyway_parent_is_counted_again_by_its_waiting_dependant(
    dsn: str, recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D waits for P (run anyway) and Q (fail, in a queue nobody drains here). P fails for
    good: D counts it finished and waits for Q. P retried, then done: D must still wait for
    Q. Catches the retried parent counted off twice (0032): D ran with Q never run; and a
    second failure of P releasing D with Q1 and Q2 both queued."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        p = enqueue(_node("p", fail_attempts=[1]), task="dag_node", max_attempts=1)
        q = enqueue(_node("q"), task="dag_node", queue="slow")
        d = enqueue(_node("d"), task="dag_node", after={p: "run anyway", q: "fail"})
        _drain(store)
        assert _jobs(dsn)[d][:2] == ("waiting", 1)
        assert _cli(capsys, "retry", str(p), "--dsn", dsn)["retried"] == [p]
        assert _jobs(dsn)[d][:2] == ("waiting", 2)  # P unfinished again
        _drain(store)  # P's second attempt succeeds
        assert _jobs(dsn)[p][0] == "done" and _jobs(dsn)[d][:2] == ("waiting", 1)
        _drain(store, "slow")
        _drain(store)
        p2 = enqueue(_node("p2", fail=True), task="dag_node", max_attempts=1)
        q1 = enqueue(_node("q1"), task="dag_node", queue="slow")
        q2 = enqueue(_node("q2"), task="dag_node", queue="slow")
        d2 = enqueue(_node("d2"), task="dag_node", after={p2: "run anyway", q1: "fail", q2: "fail"})
        _drain(store)
        _cli(capsys, "retry", str(p2), "--dsn", dsn)
        _drain(store)  # P2 fails again
        assert _jobs(dsn)[d2][:2] == ("waiting", 2)  # Q1 and Q2 still to come
    assert _runs(recorded) == ["p", "p", "q", "d", "p2", "p2"]


def test_a_retried_dependant_waits_for_its_parents_and_is_refused_behind_a_failed_one(
    dsn: str, recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick retry` of a dependant queuing it whatever its parents: D, cancelled
    while it waited for P, ran at once when retried, P still queued; D2, failed by its
    parent's failure (policy fail), ran when retried alone, its parent still failed. Now D
    waits for P again (counted), and the retry of D2 alone is refused, naming its parent;
    retrying both runs them in order."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        p = enqueue(_node("p"), task="dag_node", queue="slow")
        d = enqueue(_node("d"), task="dag_node", after=[p])
        _cli(capsys, "cancel", str(d), "--dsn", dsn)
        assert _cli(capsys, "retry", str(d), "--dsn", dsn)["retried"] == [d]
        assert _jobs(dsn)[d][:2] == ("waiting", 1)
        _drain(store)
        assert _runs(recorded) == []  # not before its parent
        _drain(store, "slow")
        _drain(store)
        assert _runs(recorded) == ["p", "d"]

        p2 = enqueue(_node("p2", fail=True), task="dag_node", max_attempts=1)
        d2 = enqueue(_node("d2"), task="dag_node", after=[p2])
        _drain(store)
        assert main(["retry", str(d2), "--dsn", dsn]) == 1
        err = capsys.readouterr().err
        assert f"job {d2} waits for job {p2}, which failed: retry the parent" in err
        assert _jobs(dsn)[d2][0] == "failed"
        _cli(capsys, "retry", str(d2), str(p2), "--extra-attempts", "1", "--dsn", dsn)
        assert _jobs(dsn)[d2][:2] == ("waiting", 1)


def test_a_diamond_revives_its_join_only_once_no_parent_of_it_is_failed(
    dsn: str, recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """r; b and c after r; d after b and c; e after d. b and c fail for good: d and e fail.
    Retrying b (the dashboard's button) revives nothing: d's other parent c is still
    failed, so d (and e below it) would fail again at once. Retrying c (the bulk retry by
    filter) revives d and e, counting b (now done) as finished: d waits on c alone."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        r = enqueue(_node("r"), task="dag_node")
        b = enqueue(_node("b", fail_attempts=[1]), task="dag_node", max_attempts=1, after=[r])
        c = enqueue(
            _node("c", fail_attempts=[1]), task="dag_node", max_attempts=1, after=[r], queue="c"
        )
        d = enqueue(_node("d"), task="dag_node", after=[b, c])
        e = enqueue(_node("e"), task="dag_node", after=[d])
        _drain(store)
        _drain(store, "c")
        jobs = _jobs(dsn)
        assert [jobs[j][0] for j in (r, b, c, d, e)] == ["done", "failed", "failed"] + [
            "failed"
        ] * 2

        with ui_client(make_app(dsn, allow_actions=True, kicker=NO_KICKS)) as ui:
            answer = ui.post(f"/jobs/{b}/retry", headers={"origin": LOCAL})
            assert answer.status_code == 303
            assert "wait for it again" not in ui.get(answer.headers["location"]).text
        jobs = _jobs(dsn)
        assert jobs[b][0] == "queued" and (jobs[d][0], jobs[e][0]) == ("failed", "failed")
        _drain(store)  # b runs; d is not released by it
        assert _jobs(dsn)[b][0] == "done" and _jobs(dsn)[d][0] == "failed"

        counted = _cli(capsys, "retry", "--queue", "c", "--status", "failed", "--dsn", dsn)
        assert (counted["would_retry"], counted["would_revive_up_to"]) == (1, 2)  # d and e
        assert _jobs(dsn)[d][0] == "failed"  # a dry run
        out = _cli(capsys, "retry", "--queue", "c", "--status", "failed", "--yes", "--dsn", dsn)
        assert out == {"retried": 1, "revived_dependants": 2}
        jobs = _jobs(dsn)
        assert jobs[d][:2] == ("waiting", 1) and jobs[e][:2] == ("waiting", 1)

        _drain(store, "c")
        _drain(store)
    assert {status for status, *_ in _jobs(dsn).values()} == {"done"}
    assert _runs(recorded) == ["r", "b", "c", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--queue", "default"],  # one statement (the form from before the filters)
        ["--status", "failed", "--queue", "default", "--yes", "--batch", "1"],  # bulk
    ],
)
def test_a_retry_selecting_a_parent_and_its_failed_dependants_runs_them_in_order(
    dsn: str, recorded: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """`pgkick retry --queue default` selects the failed chain head and the dependants it failed:
    retried as plain failed jobs they would run at once, beside their parent. They follow
    their parent instead (revived as waiting), in one statement or across batches. An
    operator-cancelled dependant of it is not revived and stays failed (unselected)."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        a = enqueue(_node("a", fail_attempts=[1]), task="dag_node", max_attempts=1)
        b = enqueue(_node("b"), task="dag_node", after=[a])
        c = enqueue(_node("c"), task="dag_node", after=[b])
        cancelled = enqueue(_node("x"), task="dag_node", after=[a], queue="x")
        store.cancel_queued(ids=[cancelled], queue=None, task=None)
        _drain(store)
        out = _cli(capsys, "retry", *argv, "--dsn", dsn)
        retried = 1 if "--yes" in argv else [a]  # the bulk form counts
        assert out == {"retried": retried, "revived_dependants": 2}
        jobs = _jobs(dsn)
        assert [jobs[j][:2] for j in (a, b, c)] == [("queued", 0), ("waiting", 1), ("waiting", 1)]
        assert jobs[cancelled][0] == "failed"
        _drain(store)
    assert _runs(recorded) == ["a", "a", "b", "c"]


def test_the_maintainer_role_retries_and_revives(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811  (the fixture imported above)
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`pgkick retry` as pgkick_maintainer (a login role in it, no more): the retry reads
    job_dependencies (granted to the worker role, which the maintainer holds) and the
    revival runs as the trigger's owner. Catches a grant the operator's login lacks."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        a = enqueue(_node("a", fail_attempts=[1]), task="dag_node", max_attempts=1)
        b = enqueue(_node("b"), task="dag_node", after=[a])
        _drain(store)
    out = _cli(capsys, "retry", str(a), "--dsn", login_as["maintainer"])
    assert out == {"retried": [a], "revived_dependants": 1}
    assert _jobs(dsn)[b][:2] == ("waiting", 1)


def test_a_dependant_whose_unique_key_a_live_job_took_stays_failed(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """b (unique key "k") failed with its parent a; a new job took "k" since. Revived, b
    would hold the key beside it: the retry of a refused as a whole by the live-key index
    (a raw unique violation). b stays failed; a is retried."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        a = enqueue(_node("a", fail_attempts=[1]), task="dag_node", max_attempts=1)
        b = enqueue(_node("b"), task="dag_node", after=[a], unique_key="k")
        _drain(store)
        holder = enqueue(_node("b2"), task="dag_node", queue="held", unique_key="k")
    out = _cli(capsys, "retry", str(a), "--dsn", dsn)
    assert out == {"retried": [a], "revived_dependants": 0}
    jobs = _jobs(dsn)
    assert (jobs[a][0], jobs[b][0], jobs[holder][0]) == ("queued", "failed", "queued")


def test_a_dependant_whose_unique_key_a_newer_job_took_and_finished_stays_failed(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As above, but the newer job with "k" is done by the retry. Revived, b would hold
    "k" while a duplicate enqueue of "k" is answered with the newest job with the key,
    the finished one, and writes nothing (0033). b stays failed; a duplicate then makes
    a new job."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        a = enqueue(_node("a", fail_attempts=[1]), task="dag_node", max_attempts=1)
        b = enqueue(_node("b"), task="dag_node", after=[a], unique_key="k")
        _drain(store)
        newer = enqueue(_node("b2"), task="dag_node", queue="held", unique_key="k")
        _drain(store, "held")
    out = _cli(capsys, "retry", str(a), "--dsn", dsn)
    assert out == {"retried": [a], "revived_dependants": 0}
    jobs = _jobs(dsn)
    assert (jobs[a][0], jobs[b][0], jobs[newer][0]) == ("queued", "failed", "done")
    with JobStore.open(dsn) as store:
        again = Enqueuer(store).enqueue(_node("b3"), task="dag_node", unique_key="k")
    assert again not in (b, newer)


def test_the_dashboard_button_says_how_many_dependants_wait_again(dsn: str) -> None:
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        a = enqueue(_node("a", fail_attempts=[1]), task="dag_node", max_attempts=1)
        enqueue(_node("b"), task="dag_node", after=[a])
        _drain(store)
    with ui_client(make_app(dsn, allow_actions=True, kicker=NO_KICKS)) as ui:
        answer = ui.post(f"/jobs/{a}/retry", headers={"origin": LOCAL})
        assert answer.status_code == 303
        assert (
            "1 dependant(s) it had failed wait for it again"
            in ui.get(answer.headers["location"]).text
        )


def test_a_fan_out_whose_run_failed_left_no_child_and_its_retry_spawns_once(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fan-out whose run fails after spawning wrote no child (they are written with its
    completion: pgkick.worker.spawn), so its retry has none to revive: the retried run
    spawns its children and join, each run once. A job enqueued after the spawner
    (policy fail) is revived."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        spawner = enqueue({"n": 3, "fail_attempts": [1]}, task="fan_out", max_attempts=1)
        after = enqueue(_node("after"), task="dag_node", after=[spawner])
        _drain(store)
        jobs = _jobs(dsn)
        assert sorted(jobs) == [spawner, after] and jobs[after][0] == "failed"

        out = _cli(capsys, "retry", str(spawner), "--dsn", dsn)
        assert out == {"retried": [spawner], "revived_dependants": 1}
        _drain(store)
        rows = store.rows(
            "SELECT task, status, count(*) FROM pgkick.jobs WHERE id <> %(id)s GROUP BY 1, 2",
            id=spawner,
        )
    assert sorted(rows) == [
        ("dag_node", "done", 1),
        ("fan_child", "done", 3),
        ("fan_join", "done", 1),
    ]


def _lock_waiter(dsn: str, application_name: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock'",
            (application_name,),
        ).fetchone()
    return bool(row and row[0])


def test_a_retry_racing_the_completion_of_the_dependants_other_parent_counts_it_once(
    dsn: str, recorded: Path
) -> None:
    """d after p and q. p failed (d with it); q is running. q's completion is written but
    not committed when the retry of p starts: the retry must wait for it and count q as
    finished. Counted as running, d would wait on q forever (q's completion decremented
    no waiting d: d was failed then)."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        p = enqueue(_node("p", fail_attempts=[1]), task="dag_node", max_attempts=1)
        q = enqueue(_node("q"), task="dag_node", queue="q")
        d = enqueue(_node("d"), task="dag_node", after=[p, q])
        _drain(store)
        assert _jobs(dsn)[d][0] == "failed"
        (claimed,) = store.claim("q", batch=1, lease=_lease())
        assert claimed.id == q
        with JobStore.open(dsn, application_name="pgkick-retrier") as other:
            retried: list[operations.Retried] = []
            with store.transaction():
                assert store.complete(q, claimed.attempts)
                retrier = threading.Thread(
                    target=lambda: retried.append(
                        operations.retry(OperatorStore(other.conn, other.clock), ids=[p])
                    )
                )
                retrier.start()
                _wait_until(lambda: _lock_waiter(dsn, "pgkick-retrier") or not retrier.is_alive())
            retrier.join(timeout=30)
        assert retried and retried[0].revived == 1
        assert _jobs(dsn)[d][:2] == ("waiting", 1)  # on p alone: q is done
        _drain(store)
    assert {status for status, *_ in _jobs(dsn).values()} == {"done"}
    assert _runs(recorded) == ["p", "p", "d"]  # q was completed by hand: no run of it


def test_a_completion_racing_a_retry_in_progress_releases_the_revived_dependant(
    dsn: str, recorded: Path
) -> None:
    """The other order: the retry of p has revived d (waiting on p and q) but not
    committed when q's completion comes: q's completion waits for it, then finds d
    waiting and counts q off (d then waits on p alone)."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        p = enqueue(_node("p", fail_attempts=[1]), task="dag_node", max_attempts=1)
        q = enqueue(_node("q"), task="dag_node", queue="q")
        d = enqueue(_node("d"), task="dag_node", after=[p, q])
        _drain(store)
        (claimed,) = store.claim("q", batch=1, lease=_lease())
        with JobStore.open(dsn, application_name="pgkick-completer") as other:
            completed: list[bool] = []
            with store.transaction():
                assert operations.retry(OperatorStore(store.conn, store.clock), ids=[p]).revived
                assert _jobs_in(store)[d] == ("waiting", 2)
                completer = threading.Thread(
                    target=lambda: completed.append(other.complete(q, claimed.attempts))
                )
                completer.start()
                _wait_until(
                    lambda: _lock_waiter(dsn, "pgkick-completer") or not completer.is_alive()
                )
            completer.join(timeout=30)
        assert completed == [True]
        assert _jobs(dsn)[d][:2] == ("waiting", 1)
        _drain(store)
    assert {status for status, *_ in _jobs(dsn).values()} == {"done"}


def _jobs_in(store: JobStore) -> dict[int, tuple[str, int]]:
    rows = store.rows("SELECT id, status, waiting_on FROM pgkick.jobs")
    return {row[0]: (row[1], row[2]) for row in rows}


def _lease() -> timedelta:
    return timedelta(minutes=5)


def _wait_until(condition: Callable[[], bool], deadline_s: float = 30.0) -> None:
    """Until the other session is blocked on a lock, or done without waiting (the bug: the
    test's assertions then fail). A condition polled, not a sleep that orders anything."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, "the other session neither waited nor finished"
        time.sleep(0.01)


def test_a_failed_parent_is_not_purged_while_the_dependant_it_failed_may_be_retried(
    dsn: str, clock: FakeClock, recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches retention deleting a failed parent before the dependant its failure ended
    (linked days later, so finished later): the link went with the parent, and retrying
    the dependant ran it as if that parent had succeeded. The parent stays while its
    dependant may be retried, so the retry is refused behind it; it goes once the
    dependant itself was purged."""
    with JobStore.open(dsn, clock) as store:
        enqueue = Enqueuer(store).enqueue
        p = enqueue(_node("p", fail=True), task="dag_node", max_attempts=1)
        _drain(store)
        clock.advance(5 * 86_400)
        d = enqueue(_node("d"), task="dag_node", after=[p])
        assert _jobs(dsn)[d][0] == "failed"  # its parent had failed: it fails at once
        clock.advance(3 * 86_400)
        assert store.purge_finished(timedelta(days=7)) == 0
        assert main(["retry", str(d), "--dsn", dsn]) == 1
        assert f"job {d} waits for job {p}, which failed" in capsys.readouterr().err
        _drain(store)
        assert _runs(recorded) == ["p"]
        clock.advance(5 * 86_400)
        assert store.purge_finished(timedelta(days=7)) == 2  # d, then p: the chain whole
    assert _jobs(dsn) == {}
