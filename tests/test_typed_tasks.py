"""Typed task handles: mypy catches a wrong payload; typed payloads round-trip to the task."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest
from mypy import api as mypy_api

from pgkick.producer import enqueue as producer
from pgkick.tasks.context import JobContext
from pgkick.tasks.handle import Task
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.helpers import job_row
from tests.store import JobStore
from tests.test_producer import RecordingKicker, count_jobs

TYPING = Path(__file__).parent / "typing"
OPTIONS = WorkerOptions(heartbeat=False)


def _mypy_errors(*paths: Path) -> dict[str, list[int]]:
    """For each file, the lines where mypy (the project's --strict config) reports an error."""
    config = Path(__file__).parent.parent / "pyproject.toml"  # mypy_path = functions
    out, _err, _status = mypy_api.run(
        ["--config-file", str(config), "--cache-dir", "/dev/null", *map(str, paths)]
    )
    found: dict[str, set[int]] = {path.name: set() for path in paths}
    for name, line in re.findall(r"([\w.]+\.py):(\d+): error", out):
        found.setdefault(name, set()).add(int(line))
    return {name: sorted(lines) for name, lines in found.items()}


def test_mypy_reports_every_wrong_payload_and_nothing_in_the_good_file() -> None:
    """Catches: a handle that is not generic over the payload (Task[Any], or the decorator
    returning the bare function), so a wrong payload passes the type checker."""
    bad, good = TYPING / "typed_tasks_bad.py", TYPING / "typed_tasks_good.py"
    marked = [n for n, line in enumerate(bad.read_text().splitlines(), 1) if "  # E:" in line]
    assert len(marked) == 11  # the last four: async forms, a missing await (#27); a batch task
    errors = _mypy_errors(bad, good)
    assert errors == {bad.name: marked, good.name: []}


@dataclass
class Refund:
    order: int
    cents: int


class Receipt(TypedDict):
    order: int


class Invoice(pydantic.BaseModel):
    order: int
    lines: list[str]


def _drain(dsn: str, tasks: Registry) -> None:
    with JobStore.open(dsn) as store:
        Worker(store, tasks, RecordingKicker(), OPTIONS).drain("default", lambda: 600_000)


def test_dataclass_and_pydantic_payloads_reach_the_task_as_their_type(dsn: str) -> None:
    """Catches: a dataclass/pydantic payload not serialised before validation (TypeError),
    or handed to the task as a dict while its signature promises the declared type."""
    tasks = Registry()
    seen: list[Any] = []

    @tasks.task("refund")
    def refund(payload: Refund, job: JobContext) -> None:
        seen.append(payload)

    @tasks.task("invoice")
    def invoice(payload: Invoice) -> None:
        seen.append(payload)

    kicker = RecordingKicker()
    first = refund.enqueue_and_kick(Refund(order=1, cents=250), dsn=dsn, kicker=kicker)
    invoice.enqueue_and_kick(Invoice(order=2, lines=["a", "b"]), dsn=dsn, kicker=kicker)
    assert job_row(dsn, first)["task"] == "refund"
    _drain(dsn, tasks)
    assert seen == [Refund(order=1, cents=250), Invoice(order=2, lines=["a", "b"])]


def test_a_payload_that_does_not_fit_the_dataclass_says_so(dsn: str) -> None:
    """Catches a job enqueued by name with a payload its dataclass cannot be built from
    failing with `TypeError: Refund.__init__() missing 1 required positional argument`,
    which names neither the payload nor the declared type; it is retried (a worker deployed
    before its producer may be the one out of date) and its error names both, keys only."""
    tasks = Registry()

    @tasks.task("refund")
    def refund(payload: Refund) -> None:
        raise AssertionError("never rebuilt")

    kicker = RecordingKicker()
    job = producer.enqueue_and_kick(
        {"order": 8, "email": "a@b.c"}, task="refund", dsn=dsn, kicker=kicker
    )
    _drain(dsn, tasks)
    row = job_row(dsn, job)
    assert (row["status"], row["attempts"]) == ("queued", 1)
    assert row["last_error"].startswith(
        "InvalidArgumentType: payload (keys ['email', 'order']) does not fit Refund, the "
        "task's payload type: "
    ), row["last_error"]
    assert "a@b.c" not in row["last_error"]


def test_handle_is_callable_and_string_names_still_work(dsn: str) -> None:
    """Catches: the decorator breaking existing code that calls a task function directly,
    or enqueues it by its string name."""
    tasks = Registry()
    seen: list[Any] = []

    @tasks.task("receipt")
    def receipt(payload: Receipt) -> str:
        seen.append(payload)
        return "direct"

    assert isinstance(receipt, Task) and receipt.name == "receipt"
    assert receipt({"order": 0}) == "direct"
    producer.enqueue_and_kick({"order": 1}, task="receipt", dsn=dsn, kicker=RecordingKicker())
    receipt.enqueue_many([{"order": 2}, {"order": 3}], dsn=dsn, kicker=RecordingKicker())
    _drain(dsn, tasks)
    assert sorted(p["order"] for p in seen) == [0, 1, 2, 3]


def test_bad_payload_through_the_handle_fails_before_anything_is_written(dsn: str) -> None:
    """Catches: the handle bypassing validation (a NaN committed), or accepting something
    that is not an enqueue target as the first argument of .enqueue."""
    tasks = Registry()

    @tasks.task("t")
    def t(payload: dict[str, float]) -> None:
        pass

    with pytest.raises(ValueError, match="NaN"):
        t.enqueue_and_kick({"x": float("nan")}, dsn=dsn, kicker=RecordingKicker())
    with pytest.raises(ValueError, match=r"jobs\[1\]: payload: NaN"):
        t.enqueue_many([{"x": 1.0}, {"x": float("nan")}], dsn=dsn, kicker=RecordingKicker())
    with pytest.raises(TypeError, match="must be where the job goes"):
        t.enqueue(dsn, {"x": 1.0})  # type: ignore[arg-type]
    assert count_jobs(dsn) == 0


def test_async_handle_forms_commit_and_the_sync_form_warns_once_on_a_loop(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches (#27, defect 5): no async enqueue_and_kick on a typed handle, and the
    synchronous one blocking a running event loop without a word (or warning per call)."""
    import asyncio
    import warnings

    import psycopg

    from pgkick import aio
    from pgkick.connections import aio_pool
    from pgkick.kick.kickers import NoKicker
    from pgkick.tasks import handle as handle_module

    monkeypatch.setattr(handle_module, "_warned_about_loop", False)
    tasks = Registry()
    note = tasks.task("async_note")(lambda payload: None)
    none = NoKicker()

    async def app() -> list[int]:
        first = await note.enqueue_and_kick_async({"n": 1}, dsn=dsn, kicker=none)
        more = await note.enqueue_many_async([{"n": 2}, {"n": 3}], dsn=dsn, kicker=none)
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=none) as jobs:
                joined = await note.enqueue(jobs, {"n": 4})
        with pytest.warns(RuntimeWarning, match=r"await async_note.enqueue_and_kick_async"):
            blocking = note.enqueue_and_kick({"n": 5}, dsn=dsn, kicker=none)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per process, not per call
            again = note.enqueue_and_kick({"n": 6}, dsn=dsn, kicker=none)
        await aio_pool.close_all()
        return [first, *more, joined, blocking, again]

    ids = asyncio.run(app())
    assert len(set(ids)) == 6 and count_jobs(dsn) == 6
