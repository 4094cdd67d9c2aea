"""enqueue_many's bulk path (issue 32): the fast check of a plain job and the parallel
arrays that send a uniform column as one value must change nothing a caller sees.

- `job_spec_of` takes a shortcut for a job holding only payload, task and queue: it must
  give the very JobSpec `job_spec` gives, and refuse exactly what it refuses with the same
  message (the same first bad field).
- `bulk.arrays` sends a column whose values are all equal as one value: every column,
  uniform or mixed, default or not, must be stored as given.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgkick.producer.enqueue import Enqueuer
from pgkick.validation import job_spec, job_spec_of
from tests.helpers import job_row
from tests.store import JobStore

names = st.one_of(
    st.sampled_from(["default", "noop", "emails", "", " x", "a" * 129, "tab\tname"]),
    st.text(max_size=12),
    st.integers(),
    st.none(),
)
payloads = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.sampled_from(["\x00", "\ud800", 1e23]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3),
    ),
    max_leaves=8,
)


def _outcome(check: Any) -> Any:
    try:
        return check()
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


@given(payload=payloads, task=names, queue=st.one_of(st.just(...), names))
def test_a_plain_job_is_checked_as_job_spec_checks_it(payload: Any, task: Any, queue: Any) -> None:
    job = {"payload": payload, "task": task}
    options = {} if queue is ... else {"queue": queue}
    job.update(options)
    fast = _outcome(lambda: job_spec_of(job, 1_000, 7))
    full = _outcome(lambda: job_spec(payload, task=task, max_payload_bytes=1_000, **options))
    if isinstance(full, tuple) and len(full) == 2 and isinstance(full[0], type):
        assert fast == (full[0], f"jobs[7]: {full[1]}")
    else:
        assert fast == full
        assert type(fast) is type(full)


@pytest.mark.parametrize(
    ("job", "refusal"),
    [
        ({"payload": {}, "task": "t", "queue": ""}, "jobs[3]: queue: must not be empty"),
        ({"payload": {}, "task": 5}, "jobs[3]: task: must be a string, got int"),
        ({"payload": {1: 2}, "task": "t"}, "jobs[3]: payload: object keys must be strings"),
        ({"payload": "x" * 100, "task": "t"}, "jobs[3]: payload: 102 bytes as JSON"),
        ({"payload": float("nan"), "task": "t", "queue": "q"}, "jobs[3]: payload: NaN"),
    ],
)
def test_a_plain_job_s_refusal_names_it_and_its_field(job: dict[str, Any], refusal: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        job_spec_of(job, 50, 3)
    assert str(caught.value).startswith(refusal)


@pytest.fixture
def enqueuer(dsn: str) -> Iterator[Enqueuer]:
    with JobStore.open(dsn) as store:
        yield Enqueuer(store)


def test_uniform_and_mixed_columns_are_stored_as_given(enqueuer: Enqueuer, dsn: str) -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    uniform = {"queue": "q1", "priority": 7, "max_attempts": 3, "group": "g", "rate_key": "r"}
    batches: list[list[dict[str, Any]]] = [
        [{"payload": i, "task": "t", **uniform, "run_at": at} for i in range(3)],
        [{"payload": i, "task": "t", **uniform, "delay": 3600} for i in range(3)],
        [
            {"payload": 0, "task": "a"},
            {"payload": 1, "task": "b", "queue": "q2", "priority": -5, "max_attempts": 9},
            {"payload": 2, "task": "a", "group": "g2", "rate_key": "r2", "delay": 60},
            {"payload": 3, "task": "a", "run_at": at},
        ],
    ]
    for jobs in batches:
        ids = enqueuer.enqueue_many(jobs)
        for job_id, job in zip(ids, jobs, strict=True):
            row = job_row(dsn, job_id)
            assert row["payload"] == job["payload"]
            assert (row["queue"], row["task"]) == (job.get("queue", "default"), job["task"])
            assert row["priority"] == job.get("priority", 0)
            assert row["max_attempts"] == job.get("max_attempts", 5)
            assert (row["group_key"], row["rate_key"]) == (job.get("group"), job.get("rate_key"))
            if "run_at" in job:
                assert row["run_at"] == at
            else:
                due_in = row["run_at"] - row["created_at"]
                expected = timedelta(seconds=job.get("delay", 0))
                assert expected <= due_in < expected + timedelta(seconds=30)
