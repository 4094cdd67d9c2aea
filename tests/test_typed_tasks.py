"""Typed task handles: mypy catches a wrong payload; typed payloads round-trip to the task."""

from __future__ import annotations

import re
from dataclasses import InitVar, dataclass, field
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


@dataclass
class Charge:
    order: int
    cents: int
    label: str = field(init=False)  # computed, not passed

    def __post_init__(self) -> None:
        self.label = f"order {self.order}"


@dataclass
class Scaled:
    cents: int
    rate: InitVar[int]  # passed, never stored: asdict leaves it out

    def __post_init__(self, rate: int) -> None:
        self.cents *= rate


def test_a_dataclass_with_a_computed_field_reaches_the_task(dsn: str) -> None:
    """Catches a `field(init=False)` payload accepted at enqueue (dumped with asdict, the
    computed field included) and then failing every attempt with `__init__() got an
    unexpected keyword argument 'label'`; and an InitVar, which asdict leaves out, so no
    stored payload could be rebuilt: refused where the task is declared."""
    tasks = Registry()
    seen: list[Any] = []

    @tasks.task("charge")
    def charge(payload: Charge) -> None:
        seen.append(payload)

    charge.enqueue_and_kick(Charge(order=7, cents=250), dsn=dsn, kicker=RecordingKicker())
    _drain(dsn, tasks)
    assert seen == [Charge(order=7, cents=250)] and seen[0].label == "order 7"

    def scaled(payload: Scaled) -> None:
        raise AssertionError("never declared")

    with pytest.raises(TypeError, match=r"task 'scaled': .*Scaled.*InitVar 'rate'"):
        tasks.task("scaled")(scaled)
    assert tasks.names() == ["charge"]


class Order(pydantic.BaseModel):
    order_id: int = pydantic.Field(alias="orderId")  # an API's camelCase


class Priced(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    cents: int

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def euros(self) -> float:
        return self.cents / 100


class Renamed(pydantic.BaseModel):
    order: int = pydantic.Field(serialization_alias="ord")  # dumped as a name it refuses


def test_pydantic_payloads_with_aliases_and_computed_fields_reach_the_task(dsn: str) -> None:
    """Catches a model dumped by field name (and with its computed fields) while validated
    by alias (and refusing extra keys): accepted at enqueue, refused by the worker on every
    attempt. One that still cannot make the trip is refused at enqueue, nothing written."""
    tasks = Registry()
    seen: list[Any] = []

    @tasks.task("order")
    def order(payload: Order) -> None:
        seen.append(payload)

    @tasks.task("priced")
    def priced(payload: Priced) -> None:
        seen.append(payload)

    @tasks.task("renamed")
    def renamed(payload: Renamed) -> None:
        raise AssertionError("never enqueued")

    kicker = RecordingKicker()
    order.enqueue_and_kick(Order(orderId=42), dsn=dsn, kicker=kicker)
    priced.enqueue_many([Priced(cents=250)], dsn=dsn, kicker=kicker)
    _drain(dsn, tasks)
    assert seen == [Order(orderId=42), Priced(cents=250)]
    with pytest.raises(TypeError, match=r"task 'renamed': .*Renamed.* does not survive"):
        renamed.enqueue_and_kick(Renamed(order=1), dsn=dsn, kicker=kicker)
    assert count_jobs(dsn) == 2


@dataclass
class Line:
    sku: str
    cents: int


@dataclass
class Basket:
    first: Line
    lines: list[Line]
    by_sku: dict[str, Line]
    gift: Line | None = None


@dataclass
class Either:
    line: Line | Refund  # which one a dict is, nothing says


def test_nested_dataclasses_are_rebuilt_or_refused_where_the_task_is_declared(dsn: str) -> None:
    """Catches a dataclass field holding another dataclass (alone, in a list, a dict, or
    optional) reaching the task as a dict (asdict recurses, only the outer was rebuilt):
    `payload.first.sku` raised AttributeError every attempt. A field no rebuild can read
    (a union of two dataclasses) is refused at registration."""
    tasks = Registry()
    seen: list[Any] = []

    @tasks.task("basket")
    def basket(payload: Basket) -> None:
        seen.append(payload)

    line = Line("a", 1)
    sent = [Basket(line, [line, Line("b", 2)], {"a": line}, None), Basket(line, [], {}, line)]
    basket.enqueue_many(sent, dsn=dsn, kicker=RecordingKicker())
    _drain(dsn, tasks)
    assert seen == sent and isinstance(seen[0].first, Line)

    def either(payload: Either) -> None:
        raise AssertionError("never declared")

    with pytest.raises(TypeError, match=r"task 'either': .*Either\.line"):
        tasks.task("either")(either)


class Card(pydantic.BaseModel):
    order: int
    card: str = pydantic.Field(max_length=4)


def test_a_payload_that_does_not_fit_the_model_says_where_never_what(dsn: str) -> None:
    """Catches pydantic's ValidationError stored whole in last_error: it quotes each bad
    input (`input_value='4111 1111 ...'`), where the docs promise the type and keys only."""
    tasks = Registry()

    @tasks.task("card")
    def card(payload: Card) -> None:
        raise AssertionError("never rebuilt")

    job = producer.enqueue_and_kick(
        {"order": "x7", "card": "4111 1111 1111 1111"},
        task="card",
        dsn=dsn,
        kicker=RecordingKicker(),
    )
    _drain(dsn, tasks)
    row = job_row(dsn, job)
    assert (row["status"], row["attempts"]) == ("queued", 1)
    assert row["last_error"] == (
        "InvalidArgumentType: payload (keys ['card', 'order']) does not fit Card, the task's "
        "payload type: order: int_parsing; card: string_too_long"
    )


def test_only_a_second_positional_parameter_is_the_job_context(dsn: str) -> None:
    """Catches the context passed to any function of two parameters or more: `def f(payload,
    *, dry_run=False)` failed every attempt (TypeError: takes 1 positional argument), and
    `def f(payload, retries=3)` got the JobContext as `retries`. One the worker cannot tell
    or cannot call is refused where it is declared, saying how to declare it."""
    tasks = Registry()
    seen: list[Any] = []

    @tasks.task("kwonly")
    def kwonly(payload: dict[str, int], *, dry_run: bool = False) -> None:
        seen.append(("kwonly", dry_run))

    @tasks.task("typed_job")
    def typed_job(payload: dict[str, int], job: JobContext | None = None) -> None:
        seen.append(("typed_job", type(job).__name__))

    def retries(payload: dict[str, int], retries: int = 3) -> None:
        raise AssertionError("never declared")

    def extra(payload: dict[str, int], job: JobContext, extra: int) -> None:
        raise AssertionError("never declared")

    with pytest.raises(TypeError, match=r"task 'retries': its second parameter 'retries' has a"):
        tasks.task("retries")(retries)
    with pytest.raises(TypeError, match=r"task 'extra': extra\(\) .*cannot pass .*'extra'"):
        tasks.task("extra")(extra)
    kicker = RecordingKicker()
    kwonly.enqueue_and_kick({}, dsn=dsn, kicker=kicker)
    typed_job.enqueue_and_kick({}, dsn=dsn, kicker=kicker)
    _drain(dsn, tasks)
    assert sorted(seen) == [("kwonly", False), ("typed_job", "JobContext")]
    assert tasks.names() == ["kwonly", "typed_job"]


def test_enqueue_many_into_a_transaction_refuses_its_own_connection_options(dsn: str) -> None:
    """Catches `enqueue_many(into=..., dsn=..., kicker=...)` ignoring dsn and kicker without
    a word: the jobs went into the transaction's database and were kicked by its kicker."""
    import psycopg

    tasks = Registry()
    note = tasks.task("note")(lambda payload: None)
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=RecordingKicker()) as jobs:
            with pytest.raises(TypeError, match=r"into= .* dsn=, kicker= .* transaction"):
                note.enqueue_many([{}], into=jobs, dsn=dsn, kicker=RecordingKicker())
            assert note.enqueue_many([{}], into=jobs) != []
    assert count_jobs(dsn) == 1


def test_a_handle_refuses_options_that_would_override_its_task_or_payload(dsn: str) -> None:
    """Catches (a review, F3) `note.enqueue_many(payloads, task="other", payload=...)`
    writing jobs of another task with one payload for all (the options were spread over
    the handle's own fields), and the other forms failing with Python's bare 'multiple
    values for keyword argument'."""
    import asyncio

    import psycopg

    tasks = Registry()
    note = tasks.task("note")(lambda payload: None)
    kicker = RecordingKicker()
    bad: dict[str, Any] = {"task": "charge_card", "payload": {"amount": 10**6}}
    refused = r"note\.\w+: takes no payload=, task= .*the handle gives the task and payload"
    with pytest.raises(TypeError, match=refused):
        note.enqueue_many([{"order": 1}, {"order": 2}], dsn=dsn, kicker=kicker, **bad)
    task = r"note\.\w+: takes no task= .*the handle gives the task and payload"
    with pytest.raises(TypeError, match=task):  # payload=: Python's own 'multiple values'
        note.enqueue_and_kick({"order": 1}, dsn=dsn, kicker=kicker, task="charge_card")
    with pytest.raises(TypeError, match=r"note\.enqueue_many: takes no task= "):
        note.enqueue_many([{}], dsn=dsn, kicker=kicker, task="charge_card")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"note\.enqueue_many_async: takes no payload=, task="):
        asyncio.run(note.enqueue_many_async([{"order": 1}], dsn=dsn, kicker=kicker, **bad))
    with pytest.raises(TypeError, match=r"note\.enqueue_and_kick_async: takes no task="):
        asyncio.run(note.enqueue_and_kick_async({}, dsn=dsn, kicker=kicker, task="charge_card"))
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=kicker) as jobs:
            with pytest.raises(TypeError, match=refused):
                note.enqueue_many([{"order": 1}], into=jobs, **bad)
            with pytest.raises(TypeError, match=task):
                note.enqueue(jobs, {"order": 1}, task="charge_card")
    assert count_jobs(dsn) == 0 and kicker.kicks == []


def test_enqueue_many_async_goes_into_an_asyncio_apps_transaction(dsn: str) -> None:
    """Catches: `enqueue_many_async(into=...)` refused (the sync `enqueue_many` takes one), its
    dsn=/kicker= ignored beside into=, and a synchronous sink taken (its enqueue_many would
    write, unawaited, on a connection that blocks the loop)."""
    import asyncio

    import psycopg

    from pgkick import aio
    from pgkick.connections import aio_pool

    tasks = Registry()
    note = tasks.task("note")(lambda payload: None)
    kicker = RecordingKicker()

    class Rollback(Exception):
        pass

    async def app() -> tuple[list[int], list[int]]:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                with pytest.raises(TypeError, match=r"into= .* dsn=, kicker= .* transaction"):
                    await note.enqueue_many_async([{}], into=jobs, dsn=dsn, kicker=kicker)
                ids = await note.enqueue_many_async([{"n": 1}, {"n": 2}], into=jobs, queue="mail")
            with pytest.raises(Rollback):
                async with aio.transaction(conn, kicker=kicker) as jobs:
                    await note.enqueue_many_async([{"n": 3}], into=jobs)
                    raise Rollback
            pending = aio.enqueue_in(conn, kicker=kicker)
            joined = await note.enqueue_many_async([{"n": 4}], into=pending)
            await conn.commit()
            assert await pending.kick() == joined
        await aio_pool.close_all()
        return ids, joined

    ids, joined = asyncio.run(app())
    assert len(ids) == 2 and len(joined) == 1 and count_jobs(dsn) == 3
    assert kicker.kicks == [("mail", "enqueue"), ("default", "enqueue")]
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=kicker) as sync_jobs:
            sync_sink = r"note\.enqueue_many_async: into .* use note\.enqueue_many\(into="
            with pytest.raises(TypeError, match=sync_sink):
                asyncio.run(note.enqueue_many_async([{}], into=sync_jobs))  # type: ignore[arg-type]
    assert count_jobs(dsn) == 3


def test_the_sync_forms_refuse_an_asyncio_sink_naming_the_async_form(dsn: str) -> None:
    """Catches `note.enqueue_many(into=<aio.transaction's jobs>)` failing with Python's bare
    "'coroutine' object is not iterable" and a never-awaited warning, and
    `pgkick.enqueue_in(AsyncConnection)` not saying where the asyncio form is (note 62's
    aio review)."""
    import asyncio
    import warnings

    import psycopg

    from pgkick import aio
    from pgkick.connections import aio_pool
    from pgkick.producer.joined import enqueue_in

    tasks = Registry()
    note = tasks.task("note")(lambda payload: None)

    async def app() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=RecordingKicker()) as jobs:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # a coroutine never awaited fails the test
                    with pytest.raises(TypeError, match=r"await note\.enqueue_many_async\(into="):
                        note.enqueue_many([{}], into=jobs)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"pgkick\.aio\.enqueue_in\(conn\)"):
                enqueue_in(conn)  # type: ignore[arg-type]
        await aio_pool.close_all()

    asyncio.run(app())
    assert count_jobs(dsn) == 0
