"""Bad input anywhere: a clear error naming the problem, nothing written, nothing disturbed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgkick.config import Settings
from pgkick.errors import InvalidArgument, PermanentError
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.producer.enqueue import Enqueuer
from pgkick.store import groups
from pgkick.store import migrations as schema
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.runtime import Runtime
from pgkick_dev.local.context import FakeLambdaContext
from tests.chaos import Chaos
from tests.helpers import FakeClock, job_row, load_handler, seed
from tests.store import JobStore

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary(max_size=4)
)
payloads = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(), st.integers()), inner, max_size=4),
    ),
    max_leaves=12,
)
names = st.one_of(st.text(max_size=140), st.integers(), st.none())


@pytest.fixture
def enqueuer(dsn: str) -> Iterator[Enqueuer]:
    with JobStore.open(dsn) as store:
        yield Enqueuer(store)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=payloads, queue=names, task=names)
def test_random_input_is_refused_clearly_or_round_trips_exactly(
    enqueuer: Enqueuer, payload: Any, queue: Any, task: Any
) -> None:
    before = enqueuer.store.rows("SELECT count(*) FROM pgkick.jobs")[0][0]
    try:
        job_id = enqueuer.enqueue(payload, task=task, queue=queue)
    except (ValueError, TypeError) as exc:
        field = str(exc).split(":")[0]
        assert field in {"payload", "queue", "task"}, exc  # the message names the field
        after = enqueuer.store.rows("SELECT count(*) FROM pgkick.jobs")[0][0]
        assert after == before  # and nothing was written
        return
    row = enqueuer.store.rows(
        "SELECT payload, queue, task FROM pgkick.jobs WHERE id = %(id)s", id=job_id
    )
    assert row == [(payload, queue, task)] or _equal_json(row[0][0], payload)


def _equal_json(stored: Any, given_: Any) -> bool:
    """jsonb keeps numbers as numeric: 1e16 comes back as 10000000000000000, equal in value.

    A loop, not recursion: payloads nest 500 levels deep, and hypothesis traces each
    frame when it explains a failure (a recursive walk overflowed the stack there)."""
    pending = [(stored, given_)]
    while pending:
        left, right = pending.pop()
        if isinstance(right, list | tuple):
            if not isinstance(left, list) or len(left) != len(right):
                return False
            pending.extend(zip(left, right, strict=True))
        elif isinstance(right, dict):
            if not isinstance(left, dict) or left.keys() != right.keys():
                return False
            pending.extend((left[k], v) for k, v in right.items())
        elif left != right:
            return False
    return True


# Names stay valid below, so every example reaches the payload and schedule checks (with
# random names, about 2% did: most stopped at an invalid queue or task first).
valid_names = st.sampled_from(["default", "mail", "q-1", "élan", "a" * 128])
floats = st.one_of(
    st.floats(),  # NaN, Infinity, huge and tiny (subnormal) values included
    st.sampled_from([1e23, -1e23, 1e308, 5e-324, 2.0**53, 2.0**60, 1e16, 0.1, -0.0]),
)
big_ints = st.one_of(st.integers(), st.integers(-(10**400), 10**400))
odd_text = st.one_of(
    st.text(),
    st.text(st.characters(codec="utf-8")),
    st.sampled_from(["\x00", "a\x00b", "\ud800", "\udfff x", "\u202e", "\U0001f600", "\\u0000"]),
)
leaves = st.one_of(st.none(), st.booleans(), big_ints, floats, odd_text)
json_like = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(odd_text, inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def nested(draw: st.DrawFn) -> Any:
    """A payload nested to a random depth, past the 500 levels pgkick accepts."""
    value: Any = draw(leaves)
    for _ in range(draw(st.integers(0, 700))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


delays = st.one_of(
    floats,
    big_ints,
    st.sampled_from([timedelta.max, timedelta.min, timedelta(days=3_000_000), timedelta(0)]),
    st.timedeltas(),
    st.floats(0, 10**9),
)
run_ats = st.datetimes(
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12))])
)


def _count(store: JobStore) -> int:
    return int(store.rows("SELECT count(*) FROM pgkick.jobs")[0][0])


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=st.one_of(json_like, nested()), queue=valid_names, task=valid_names)
def test_payloads_are_refused_naming_the_field_or_read_back_equal(
    enqueuer: Enqueuer, payload: Any, queue: str, task: str
) -> None:
    """Catches a payload that commits and reads back different (1e23 came back as
    100000000000000000000000) or fails with an error that names no field: floats with NaN,
    Infinity, huge and tiny values, integers past 4,300 digits, deep nesting, NULs, lone
    surrogates. Either `payload: ...` and no row, or a row whose payload equals it."""
    before = _count(enqueuer.store)
    try:
        job_id = enqueuer.enqueue(payload, task=task, queue=queue)
    except (ValueError, TypeError) as exc:
        assert str(exc).startswith("payload: "), exc
        assert _count(enqueuer.store) == before
        return
    (row,) = enqueuer.store.rows("SELECT payload FROM pgkick.jobs WHERE id = %(id)s", id=job_id)
    assert _equal_json(row[0], payload)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    schedule=st.one_of(st.tuples(st.just("delay"), delays), st.tuples(st.just("run_at"), run_ats)),
    payload=json_like,
)
def test_schedules_are_refused_naming_the_field_or_stored_exactly(
    dsn: str, schedule: tuple[str, Any], payload: Any
) -> None:
    """Catches a due time that overflows (inf, 1e308, 10**20 raised OverflowError; nan an
    error naming nothing) or that PostgreSQL stores and Python cannot read back (1e13 s,
    timedelta.max, a run_at at year 9999 in another zone: committed, then DataError).
    Either `delay: ...`/`run_at: ...` and no row, or run_at is exactly what was asked."""
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    field, value = schedule
    with JobStore.open(dsn, clock) as store:
        before = _count(store)
        try:
            job_id = Enqueuer(store).enqueue({}, task="noop", **{field: value})
        except (ValueError, TypeError) as exc:
            assert str(exc).startswith(f"{field}: "), exc
            assert _count(store) == before
            return
        (row,) = store.rows("SELECT run_at FROM pgkick.jobs WHERE id = %(id)s", id=job_id)
    if field == "run_at":
        assert row[0] == value
    else:
        span = value if isinstance(value, timedelta) else timedelta(seconds=value)
        assert row[0] == clock.now + span


def test_enqueue_many_names_the_job_that_is_not_a_mapping(enqueuer: Enqueuer) -> None:
    """Catches `enqueue_many([..., None])` raising AttributeError with no jobs[i]."""
    for bad in (None, 5, "job", ["payload"]):
        with pytest.raises(TypeError, match=r"^jobs\[1\]: "):
            enqueuer.enqueue_many([{"payload": {}, "task": "noop"}, bad])  # type: ignore[list-item]
    assert _count(enqueuer.store) == 0


def test_tasks_that_reject_or_return_odd_things(dsn: str) -> None:
    tasks = Registry()

    @tasks.task("strict")
    def strict(payload: Any) -> None:
        if "email" not in payload:
            raise PermanentError("payload lacks 'email'")

    @tasks.task("picky")
    def picky(payload: Any) -> None:
        raise ValueError(f"cannot parse {payload['date']!r}")

    # Its return value is stored as the job's result (pgkick.tasks.results): one that is not JSON
    # fails the job for good, naming the problem, rather than crashing the batch's completion.
    tasks.task("odd")(lambda payload: (object(), iter([1])))
    with JobStore.open(dsn) as store:
        (rejected,) = seed(store, 1, task="strict", payload='{"to": "x"}')
        (retried,) = seed(store, 1, task="picky", payload='{"date": "31/02"}')
        (odd,) = seed(store, 1, task="odd")
    settings_ = Settings.from_env({"PGKICK_KICKER": "none"})
    summary = Runtime(settings_, NoKicker(), dsn=lambda: dsn, tasks=tasks).drain(
        "default", lambda: 60_000
    )
    assert (summary.failed, summary.retried, summary.done) == (2, 1, 0)
    assert job_row(dsn, rejected)["last_error"] == "PermanentError: payload lacks 'email'"
    assert job_row(dsn, retried)["last_error"] == "ValueError: cannot parse '31/02'"
    assert job_row(dsn, retried)["status"] == "queued"
    odd_row = job_row(dsn, odd)
    assert (odd_row["status"], odd_row["attempts"]) == ("failed", 1)
    assert "result: Object of type object is not JSON serializable" in str(odd_row["last_error"])


def test_a_task_that_hangs_past_the_lease_is_killed_and_fails_at_max_attempts(
    dsn: str, tmp_path: Path
) -> None:
    """Lambda kills an invocation at its timeout; the reaper then counts the attempt."""
    chaos = Chaos(dsn, tmp_path)
    try:
        (job_id,) = chaos.enqueue(1, {"sleep": 60}, max_attempts=2)
        chaos.recover([job_id], timeout=60)
        job = job_row(dsn, job_id)
        assert (job["status"], job["last_error"]) == ("failed", "lease expired (attempt 2 of 2)")
        assert chaos.kicker.stats.timeouts >= 2
    finally:
        chaos.close()


def test_worker_refuses_a_database_without_the_schema(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", empty_dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    app = load_handler("worker")
    with pytest.raises(schema.SchemaError, match=r"schema is missing.*pgkick migrate"):
        app.handler({"queue": "default"}, FakeLambdaContext())
    with psycopg.connect(empty_dsn) as conn:  # and it created nothing
        assert conn.execute("SELECT to_regnamespace('pgkick')").fetchone() == (None,)


def test_a_due_time_past_year_9999_is_refused_before_the_insert_in_every_api(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `delay=3e11` (about 9,500 years) committing a row whose run_at Python cannot
    read back: the insert committed, then DataError. All three producer APIs refuse it,
    naming the field, and nothing is written."""
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "0")
    calls = [
        lambda: producer.enqueue_and_kick({}, task="noop", delay=3e11, dsn=dsn, kicker=NoKicker()),
        lambda: producer.enqueue_many(
            [{"payload": {}, "task": "noop", "delay": 3e11}], dsn=dsn, kicker=NoKicker()
        ),
        lambda: producer.enqueue_and_kick(
            {}, task="noop", run_at=datetime(9999, 12, 31, 20, tzinfo=UTC), dsn=dsn
        ),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"^(jobs\[0\]: )?(delay|run_at): "):
            call()
    with psycopg.connect(dsn) as conn:
        with pytest.raises(ValueError, match=r"^delay: "):
            with producer.transaction(conn, kicker=NoKicker()) as jobs:
                jobs.enqueue({}, task="noop", delay=timedelta.max)
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


BAD_ORDERING = [
    ({"priority": 101}, ValueError, "priority: 101 is outside -100..100"),
    ({"priority": -101}, ValueError, "priority: -101 is outside"),
    ({"priority": 1.5}, TypeError, "priority: must be an integer, got float"),
    ({"priority": True}, TypeError, "priority: must be an integer, got bool"),
    ({"group": ""}, ValueError, "group: must not be empty"),
    ({"group": " g"}, ValueError, "group: ' g' has control characters or surrounding spaces"),
    ({"group": "g" * 129}, ValueError, "group: 129 characters, at most 128"),
    ({"group": 7}, TypeError, "group: must be a string, got int"),
    ({"unique_key": ""}, ValueError, "unique_key: must not be empty"),
    ({"unique_key": "a\x00b"}, ValueError, "unique_key: 'a\\x00b' has control characters"),
    ({"unique_key": "k" * 513}, ValueError, "unique_key: 513 characters, at most 512"),
    ({"unique_key": b"k"}, TypeError, "unique_key: must be a string, got bytes"),
    ({"unique_key": "\ud800"}, ValueError, "unique_key: '\\ud800' has control characters"),
]


@pytest.mark.parametrize(("fields", "error", "message"), BAD_ORDERING)
def test_bad_priorities_groups_and_unique_keys_are_refused_before_any_write_in_every_api(
    dsn: str, fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Catches a priority, group or unique key that reaches the database (a CHECK error
    after a partial write, or a job the claim can never order) in any enqueue form, and
    an enqueue_many batch half-written before its bad job is found."""
    kicker = NoKicker()
    with pytest.raises(error, match=re.escape(message)):
        producer.enqueue_and_kick({}, task="t", dsn=dsn, kicker=kicker, **fields)
    with pytest.raises(error, match=re.escape(f"jobs[1]: {message}")):
        producer.enqueue_many(
            [{"payload": {}, "task": "t"}, {"payload": {}, "task": "t", **fields}],
            dsn=dsn,
            kicker=kicker,
        )
    with psycopg.connect(dsn) as conn:
        with pytest.raises(error, match=re.escape(message)):
            with producer.transaction(conn, kicker=kicker) as jobs:
                jobs.enqueue({}, task="t", **fields)
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


@pytest.mark.parametrize(
    ("limit", "error", "message"),
    [
        (0, ValueError, "max_running: 0 is outside 1.."),
        (-3, ValueError, "max_running: -3 is outside 1.."),
        (2.0, TypeError, "max_running: must be an integer, got float"),
        (2**31, ValueError, "is outside 1..2147483647"),
    ],
)
def test_bad_queue_limits_are_refused_before_any_write(
    store: JobStore, limit: Any, error: type[Exception], message: str
) -> None:
    """Catches a limit that would stop a queue for good (0), or reach the CHECK as a
    database error, instead of a clear error naming max_running."""
    with pytest.raises(error, match=re.escape(message)):
        groups.set_queue_limit(store, "default", limit)
    with pytest.raises(ValueError, match="queue: must not be empty"):
        groups.set_queue_limit(store, "", 2)
    assert store.rows("SELECT count(*) FROM pgkick.queue_limits") == [(0,)]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"batch": 0}, "WorkerOptions.batch: 0"),
        ({"lease": timedelta(seconds=-5)}, "WorkerOptions.lease"),
        ({"lease": timedelta(0)}, "WorkerOptions.lease"),
        ({"cancel_check": timedelta(seconds=-1)}, "WorkerOptions.cancel_check"),
        ({"backoff_jitter": 1.5}, "WorkerOptions.backoff_jitter: 1.5"),
        ({"backoff_jitter": float("nan")}, "WorkerOptions.backoff_jitter"),
        ({"backoff": timedelta(seconds=-1)}, "WorkerOptions.backoff"),
        ({"linger": timedelta(seconds=-1)}, "WorkerOptions.linger"),
        ({"max_hops": -1}, "WorkerOptions.max_hops"),
        ({"listen": "sometimes"}, "WorkerOptions.listen"),
    ],
)
def test_worker_options_no_worker_can_run_with_are_refused_before_any_claim(
    dsn: str, change: dict[str, Any], says: str
) -> None:
    """Catches the loop taking any value and misbehaving (a review, 2026-12-05): a batch of
    0 claimed nothing and left with no kick; a lease of 0 or less was over at its claim, so
    the reaper re-queued the running job until it failed; a jitter of 1.5 made retries due
    at once, burning their attempts; a negative cancel check spun the heartbeat at ~4,000
    statements a second. Refused when the worker is made, naming the field; nothing claimed."""
    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1)
        with pytest.raises(InvalidArgument, match=re.escape(says)):
            Worker(store, Registry(), NoKicker(), WorkerOptions()._replace(**change))
    assert job_row(dsn, job_id)["status"] == "queued"
