"""Bad input anywhere: a clear error naming the problem, nothing written, nothing disturbed."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgkick import schema
from pgkick.config import Settings
from pgkick.context import FakeLambdaContext
from pgkick.kick import NoKicker
from pgkick.producer import Enqueuer
from pgkick.runtime import Runtime
from pgkick.store import JobStore
from pgkick.tasks import PermanentError, Registry
from tests.chaos import Chaos
from tests.helpers import job_row, load_handler, seed

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
    before = enqueuer.store.rows("SELECT count(*) FROM jobs")[0][0]
    try:
        job_id = enqueuer.enqueue(payload, task=task, queue=queue)
    except (ValueError, TypeError) as exc:
        field = str(exc).split(":")[0]
        assert field in {"payload", "queue", "task"}, exc  # the message names the field
        after = enqueuer.store.rows("SELECT count(*) FROM jobs")[0][0]
        assert after == before  # and nothing was written
        return
    row = enqueuer.store.rows("SELECT payload, queue, task FROM jobs WHERE id = %(id)s", id=job_id)
    assert row == [(payload, queue, task)] or _equal_json(row[0][0], payload)


def _equal_json(stored: Any, given_: Any) -> bool:
    """jsonb keeps numbers as numeric: 1e16 comes back as 10000000000000000, equal in value."""
    if isinstance(given_, float) and math.isfinite(given_):
        return bool(stored == given_)
    if isinstance(given_, list | tuple):
        return len(stored) == len(given_) and all(map(_equal_json, stored, given_))
    if isinstance(given_, dict):
        return stored.keys() == given_.keys() and all(
            _equal_json(stored[k], v) for k, v in given_.items()
        )
    return bool(stored == given_)


def test_tasks_that_reject_or_return_odd_things(dsn: str) -> None:
    tasks = Registry()

    @tasks.task("strict")
    def strict(payload: Any) -> None:
        if "email" not in payload:
            raise PermanentError("payload lacks 'email'")

    @tasks.task("picky")
    def picky(payload: Any) -> None:
        raise ValueError(f"cannot parse {payload['date']!r}")

    tasks.task("odd")(lambda payload: (object(), iter([1])))  # a return value nobody reads
    with JobStore.open(dsn) as store:
        (rejected,) = seed(store, 1, task="strict", payload='{"to": "x"}')
        (retried,) = seed(store, 1, task="picky", payload='{"date": "31/02"}')
        (odd,) = seed(store, 1, task="odd")
    settings_ = Settings.from_env({"PGKICK_KICKER": "none"})
    summary = Runtime(settings_, NoKicker(), dsn=lambda: dsn, tasks=tasks).drain(
        "default", lambda: 60_000
    )
    assert (summary.failed, summary.retried, summary.done) == (1, 1, 1)
    assert job_row(dsn, rejected)["last_error"] == "PermanentError: payload lacks 'email'"
    assert job_row(dsn, retried)["last_error"] == "ValueError: cannot parse '31/02'"
    assert job_row(dsn, retried)["status"] == "queued"
    assert job_row(dsn, odd)["status"] == "done"


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
        assert conn.execute("SELECT to_regclass('jobs')").fetchone() == (None,)
