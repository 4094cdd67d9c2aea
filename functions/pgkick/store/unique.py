"""Unique jobs: while a job with a unique key is queued or running, enqueueing the key
again returns that job's id and writes nothing.

Why a partial unique index and ON CONFLICT DO NOTHING (not a look-up first): a
look-up then an insert lets two producers both see no job and both insert. The
index (`jobs_unique_live_idx`, on unique_key WHERE status IN queued/running) is
checked against every live row, committed or not: a second producer's insert
waits for the first's transaction, then skips. The insert names no conflict target
(any unique index's conflict skips): a target would be the index's predicate, whose
`status` the producer role may not read; the id's is the only other unique index, and a
sequence fills it (tests/test_security.py checks both).

What it skipped for is read by a *second* statement: the first statement's
snapshot may predate the holder's commit (the waiting case above), so reading it
back in the same statement would find nothing. A later statement (READ COMMITTED)
sees it. It reads the newest job with the key, not "the live one": a job with the
key is only ever inserted while none is live, so the newest is the holder, and
the read needs no `status` (which the producer role may not read). The holder may
have finished between the two statements: it is still the answer (it held the key
when this enqueue was made); nothing is written either way. Only if the holder
vanished meanwhile (purged) is the insert run again, at most MAX_ROUNDS times.

In `enqueue_many`, a key given twice in the batch is one job (the first
occurrence's); a key a live job holds is skipped and answered with that job's id;
the batch itself never fails for a duplicate (pgqueuer #678).

Why the keyed jobs are inserted in key order, not the batch's: an insert of a key
another open transaction inserted waits for that transaction. Two batches sharing
keys in different orders (one list reversed) would each insert a key the other
then waits for, and PostgreSQL aborts one (DeadlockDetected, nothing written: 7 of
16 such races). In one order for every batch, a transaction only ever waits for a
key after every smaller key of its own is in: a chain of waits goes up the keys
and cannot close on itself. (Python's order of str: any total order every producer
shares does.) What this cannot order is an app's own transaction that enqueues
keys in several calls: two such transactions taking two keys in opposite orders
deadlock the same way; enqueue them in one `enqueue_many`, or in sorted order, or
retry the transaction on psycopg.errors.DeadlockDetected.

A key is global, not per queue or task: put the task or queue in the key when
they should not collide. Once its job is done or failed, the key is free again.
`pgkick retry` of a failed job whose key a newer live job holds (or another failed
job of the same retry shares, or a newer job took since, now done or failed) is refused
before anything is written, naming the key and the job in the way
(`job_retry_unique_conflicts`): a retried job older than another with its key would
break the read-back above (a duplicate answered with the newer, finished job). Should a
producer take the key between that check and the retry, the index refuses the retry
(nothing written).

Debounce and throttle (`debounce=`, `throttle=`, with a key) go through
`pgkick.job_insert_flow` (migration 0015 says why a function and a per-key lock): one
statement per job, which answers the job and whether it wrote (inserted, or a debounced
job's payload and due time replaced: either way its wake-up is booked again). In a batch
they run after the other keyed jobs, in key order (the deadlock rule) and, for one key, in
the batch's order: a debounce ends with the batch's last payload, a throttle keeps its first.

The rounds are written once, as plans (`pgkick.store.statement.Steps`): the synchronous
store drives them on its connection, the asyncio forms (pgkick.aio) on an
AsyncConnection, so both send the same statements in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Any

from pgkick.errors import UniqueKeyChurn
from pgkick.store import queries
from pgkick.store.bulk import Row, arrays, sized
from pgkick.store.statement import Statement, Steps
from pgkick.validation import JobSpec

MAX_ROUNDS = 50
_UNIQUE_KEY = attrgetter("unique_key")


def _latest_holders(keys: Sequence[str | None]) -> Statement:
    return Statement(queries.JOB_GET_LATEST_BY_UNIQUE_KEYS, {"unique_keys": keys})


def insert_one(spec: JobSpec) -> Steps[tuple[Row, bool]]:
    """The job inserted (True) or the job holding its key (False); a debounced job whose
    payload and due time were replaced counts as written (True: its wake-up is booked)."""
    if spec.flow:
        (row,) = yield _flow(spec)
        return (row[0], row[1], row[2]), bool(row[3])
    for _ in range(MAX_ROUNDS):
        for row in (yield Statement(queries.JOB_INSERT_UNIQUE, spec.insert_params())):
            return (row[0], row[1], row[2]), True
        for held in (yield _latest_holders([spec.unique_key])):
            return (held[0], held[1], held[2]), False
    raise UniqueKeyChurn(f"unique_key {spec.unique_key!r}: its job kept vanishing; try again")


def _flow(spec: JobSpec) -> Statement:
    return Statement(queries.JOB_INSERT_FLOW, spec.flow_params())


def describe_conflicts(conflicts: Iterable[tuple[int, str, int, str]]) -> str:
    """Why a retry is refused: (job, key, the job in the way, its status) in words."""
    return "; ".join(_describe_conflict(*conflict) for conflict in conflicts)


def _describe_conflict(job: int, key: str, holder: int, status: str) -> str:
    if status == "shared":  # both selected
        return f"jobs {holder} and {job} share unique key {key!r} (retry one of them)"
    if status.startswith("newer "):  # a duplicate's read-back would answer the newer job
        instead = f"retry job {holder}" if status == "newer failed" else "enqueue the key again"
        return (
            f"job {job}'s unique key {key!r} was taken again since by job {holder} "
            f"({status.removeprefix('newer ')}): {instead} instead"
        )
    return f"job {job}'s unique key {key!r} is held by {status} job {holder}"


class UniqueBatch:
    """Sorts a batch's jobs: plain ones go to job_insert_many at once (`split`, then their
    rows to `took_plain`), keyed ones wait (deduplicated) for `insert_keyed`, which runs
    after them in the same transaction."""

    def __init__(self) -> None:
        self._next = 0
        self._first: dict[str, tuple[int, JobSpec]] = {}  # key -> its first job in the batch
        self._repeats: list[tuple[int, str]] = []  # later jobs of the batch with a seen key
        self._plain: list[tuple[list[tuple[int, JobSpec]], list[Any]]] = []  # jobs, their rows
        self._flow: list[tuple[str, int, JobSpec]] = []  # debounced or throttled: key, index

    @property
    def keyed(self) -> bool:
        return bool(self._first or self._flow)

    def split(self, specs: Sequence[JobSpec]) -> list[tuple[int, JobSpec]]:
        """The chunk's jobs without a key, with their index in the whole batch."""
        start = self._next
        if not any(map(_UNIQUE_KEY, specs)):  # most chunks: nothing to sort ("" is refused)
            self._next += len(specs)
            return list(zip(range(start, self._next), specs, strict=True))
        plain = []
        for spec in specs:
            index, self._next = self._next, self._next + 1
            key = spec.unique_key
            if key is None:
                plain.append((index, spec))
            elif spec.flow:
                self._flow.append((key, index, spec))
            elif key in self._first:
                self._repeats.append((index, key))
            else:
                self._first[key] = (index, spec)
        return plain

    def took_plain(self, plain: list[tuple[int, JobSpec]], rows: list[Any]) -> None:
        """The rows job_insert_many returned for a chunk's plain jobs (or `rows_of` made)."""
        self._plain.append((plain, rows))

    def insert_keyed(self) -> Steps[tuple[list[Row], list[Row]]]:
        """Insert the keyed jobs; returns every job of the batch in input order (a skipped
        one as its key's holder) and those inserted."""
        if not self.keyed:  # the common case: every row, in input order, as it came
            rows: list[Row] = [row for _, chunk in self._plain for row in chunk]
            return rows, rows
        rounds = _Rounds(self._first)
        for _ in range(MAX_ROUNDS):
            if not rounds.pending:
                break
            for keyed in sized(rounds.in_key_order()):  # runs one statement can carry
                rounds.took(
                    (yield Statement(queries.JOB_INSERT_MANY_UNIQUE, arrays(keyed, keys=True)))
                )
            if rounds.pending:
                rounds.found((yield _latest_holders(sorted(rounds.pending))))
        if rounds.pending:
            raise UniqueKeyChurn(
                f"unique keys {sorted(rounds.pending)[:5]}: their jobs kept vanishing"
            )
        flown: dict[int, Row] = {}
        for _, index, spec in sorted(self._flow, key=lambda job: job[:2]):
            (row,) = yield _flow(spec)
            flown[index] = (row[0], row[1], row[2])
            if row[3]:
                rounds.inserted.append(flown[index])
        plain: list[tuple[int, Row]] = [
            (index, row)
            for jobs, chunk in self._plain
            for (index, _), row in zip(jobs, chunk, strict=True)
        ]
        every = dict(plain)
        every.update((index, rounds.held[key]) for key, (index, _) in self._first.items())
        every.update((index, rounds.held[key]) for index, key in self._repeats)
        every.update(flown)
        return [every[i] for i in range(len(every))], [r for _, r in plain] + rounds.inserted


class _Rounds:
    """One batch's keyed jobs through insert/read-back rounds (the I/O is the caller's)."""

    def __init__(self, first: dict[str, tuple[int, JobSpec]]) -> None:
        self.pending = dict(first)
        self.held: dict[str, Row] = {}
        self.inserted: list[Row] = []

    def in_key_order(self) -> list[tuple[int, JobSpec]]:
        """In key order, whatever the batch's: the deadlock rule (the module says why)."""
        return [self.pending[key] for key in sorted(self.pending)]

    def took(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """The rows job_insert_many_unique returned: inserted, their keys now held."""
        for row in rows:
            self.held[row[3]] = (row[0], row[1], row[2])
            self.inserted.append(self.held[row[3]])
            del self.pending[row[3]]

    def found(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """The holders job_get_latest_by_unique_keys read of keys the insert skipped."""
        for row in rows:
            self.held[row[3]] = (row[0], row[1], row[2])
            del self.pending[row[3]]
