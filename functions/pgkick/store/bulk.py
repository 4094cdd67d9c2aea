"""Many jobs in one INSERT (a chunk of enqueue_many, a group commit's jobs): the jobs as
parallel arrays, and what the INSERT answers.

Why arrays with one-value columns: a chunk of 5,000 jobs is one `unnest` of parallel arrays,
and a column whose every value is the same goes as that one value (most of a plain batch:
one queue, one task, no delay), which was most of the client's cost of a chunk. Why ids
alone for a long chunk: the server inserts about 10 us a row, and sending each row's queue
and due time back as text, then parsing them, cost a tenth of a bulk insert or more; the
caller knows both from what it sent (`rows_of`). The keyed jobs' rounds
(pgkick.store.unique) and a spawn's children (pgkick.store.spawned) use the same arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from itertools import repeat
from operator import itemgetter
from typing import Any

from pgkick.store import queries
from pgkick.store.statement import Statement
from pgkick.validation import JobSpec

Row = tuple[int, str, datetime]  # id, queue, run_at: what a QueuedJob is made of
_ID = itemgetter(0)


# The payload characters one insert carries at most (each at most 4 bytes in UTF-8, and an
# array literal's escapes at most double an ASCII one: 256 MB at worst). Why: PostgreSQL
# refuses a message over 1 GB, and a chunk of 5,000 jobs of 240,000-byte payloads (each
# under the 256 KiB limit) made one Bind message of 1.2 GB: the server closed the
# connection (a review, F2). Read at each call: a test makes it small.
STATEMENT_PAYLOAD_CHARS = 64 * 2**20


def sized[J: tuple[int, JobSpec]](jobs: list[J]) -> Iterator[list[J]]:
    """`jobs` in runs whose payloads hold at most STATEMENT_PAYLOAD_CHARS characters (a job
    larger alone is a run of its own), in order: each run is one insert, all of them in the
    caller's one transaction. Most chunks are one run: their sizes summed, nothing cut."""
    budget = STATEMENT_PAYLOAD_CHARS
    sizes = [len(spec.payload_json) for _, spec in jobs]
    if sum(sizes) <= budget:
        if jobs:
            yield jobs
        return
    start, taken = 0, 0
    for end, size in enumerate(sizes):
        if taken + size > budget and end > start:
            yield jobs[start:end]
            start, taken = end, 0
        taken += size
    yield jobs[start:]


def insert_many(plain: Sequence[tuple[int, JobSpec]]) -> Statement:
    """job_insert_many for a chunk's jobs without a key."""
    return Statement(queries.JOB_INSERT_MANY, arrays(plain))


# A chunk this long is answered by ids (job_insert_many_ids, plus one transaction_now for
# the batch); a shorter one by job_insert_many's rows. Measured (enqueue_many of 100,000
# jobs, 12 rounds alternated): 93,474 jobs/s against 85,467 with every row returned; of 50,
# the extra statement (about 70 us of client CPU in the pipeline) cost more than it saved.
IDS_ONLY_FROM = 100


def insert_many_ids(plain: Sequence[tuple[int, JobSpec]], now: datetime | None) -> Statement:
    """job_insert_many_ids for a chunk's jobs without a key, at the batch's one `now` (the
    clock read once: `rows_of` adds the delays to the same instant)."""
    return Statement(queries.JOB_INSERT_MANY_IDS, {**arrays(plain), "now": now})


def transaction_now(now: datetime | None) -> Statement:
    return Statement(queries.TRANSACTION_NOW, {"now": now})


def rows_of(insert: Statement, ids: list[Any], base: datetime) -> list[Row]:
    """The rows job_insert_many would have returned, for the ids a job_insert_many_ids
    statement (`insert`) did: each job's queue, and its run_at given, else `base`
    (transaction_now) plus its delay, both read from the arrays the statement sent. A
    chunk whose jobs share one queue and one due time (most: the arrays' one-value
    columns) is zipped in C; 100,000 Python calls would give back much of what not
    returning the queues and due times saved."""
    params = insert.params
    queues = params["queues"] or repeat(params["queue"])
    if params["run_ats"] is None and params["delays"] is None:
        one = params["run_at"]
        at = base + _as_sent(params["delay"]) if one is None else one
        run_ats: Iterable[datetime] = repeat(at)
    else:
        run_ats = [
            base + _as_sent(delay) if run_at is None else run_at
            for run_at, delay in zip(
                params["run_ats"] or repeat(params["run_at"]),
                params["delays"] or repeat(params["delay"]),
                strict=False,  # one of the two may be a one-value column's repeat()
            )
        ]
    return list(zip(map(_ID, ids), queues, run_ats, strict=False))  # as many as the ids


def _as_sent(seconds: float) -> timedelta:
    """A delay as the server adds it: float seconds (`arrays`), rounded by make_interval to
    whole microseconds (rint, half to even: Python's round). The delay itself for any
    under ~285 years; a longer one loses microseconds, on the server as here."""
    return timedelta(microseconds=round(seconds * 1_000_000))


# The parallel arrays' columns: (array parameter, one-value parameter, JobSpec field).
_COLUMNS = (
    ("queues", "queue", "queue"),
    ("tasks", "task", "task"),
    ("run_ats", "run_at", "run_at"),
    ("delays", "delay", "delay"),
    ("max_attempts", "max_attempt", "max_attempts"),
    ("priorities", "priority", "priority"),
    ("groups", "group", "group"),
    ("rate_keys", "rate_key", "rate_key"),
)
_FIELD = {field: n for n, field in enumerate(JobSpec._fields)}


def arrays(specs: Sequence[tuple[int, JobSpec]], *, keys: bool = False) -> dict[str, Any]:
    """job_insert_many's parallel arrays (with keys: job_insert_many_unique's), and the
    batch's one trace context (an enqueue_many's jobs share their caller's span).

    Why a column whose every value is the same goes as that one value (its array NULL,
    read as `coalesce(x, %(one)s)`): in a plain batch every column but the payloads is
    one queue, one task, no run_at, no delay, the default attempts and priority, no group,
    no rate key. Dumping 5,000 copies of each was most of the client's cost of a chunk
    (issue 32: enqueue_many fell from 135,271 to 67,668 jobs/s as columns were added).
    A multi-argument unnest pads a NULL array with NULLs to the longest one's length; the
    payloads' array is never NULL, so the row count is the batch's."""
    by_field = list(zip(*(spec for _, spec in specs), strict=True)) if specs else []
    first = specs[0][1] if specs else None
    columns: dict[str, Any] = {
        "payloads": list(by_field[_FIELD["payload_json"]]) if specs else [],
        "traceparent": first.traceparent if first else None,
        "tracestate": first.tracestate if first else None,
    }
    for many, one, field in _COLUMNS:
        values = by_field[_FIELD[field]] if specs else ()
        if len(set(values)) == 1:  # (every value is hashable: str, int, datetime, None)
            columns[many], columns[one] = None, values[0]
        else:
            columns[many], columns[one] = list(values), None
    # float8 seconds: cheaper to send than intervals
    if columns["delays"] is not None:
        columns["delays"] = [span.total_seconds() for span in columns["delays"]]
    if columns["delay"] is not None:
        columns["delay"] = columns["delay"].total_seconds()
    if keys:
        columns["unique_keys"] = list(by_field[_FIELD["unique_key"]]) if specs else []
    return columns
