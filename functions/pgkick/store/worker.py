"""The worker's statements: claim, complete, fail, snooze, announce and withdraw, a
periodic tick's insert (the leases' heartbeat: `pgkick.store.leases`); what
pgkick.worker.* runs, and nothing else.

Why a store of its own: the worker runs as pgkick_worker, on a connection opened for one
invocation, and its rules (every write after the claim fenced by the attempt, batches
completed and claimed in one round trip, the injected clock) are the hot path of the
queue. The producer's statements are `pgkick.store.producer`'s, the reaper's and the
operators' `pgkick.store.maintenance`'s; the SQL itself lives in `sql/` (bundled as
`pgkick.store.queries`). Connections and execution are `pgkick.connections.db`'s.
"""

import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from pgkick.store import queries
from pgkick.store.dependencies import ReleasedDependants
from pgkick.store.expired import ExpiredLeases
from pgkick.store.healing import QueueHealing
from pgkick.store.leases import HeldLeases
from pgkick.store.listen import Listening
from pgkick.store.steps import StepStore


class ClaimedJob(NamedTuple):
    """A job this worker holds under a lease; `attempts` is the fencing token.

    A NamedTuple, as the producer's QueuedJob: one is made from each claimed row and
    remade for each result (`_replace`), on the drain's hot path, where a frozen
    dataclass cost 2.3 us to make and 4.7 us to replace against 0.4 and 1.6 (and ~1 ms
    to define at a cold start: its methods are compiled at import)."""

    id: int
    queue: str
    task: str
    payload: Any
    attempts: int
    max_attempts: int
    # The trace context the job was enqueued under (migration 0012) and, on the server's
    # clock, when it was enqueued, due and claimed: what its run's span records
    # (pgkick.worker.job_span); the times only while tracing_loaded().
    traceparent: str | None = None
    tracestate: str | None = None
    enqueued_at: datetime | None = None
    run_at: datetime | None = None
    claimed_at: datetime | None = None
    # Its previous attempt's lease lapsed (migration 0035): a suspect, run last and marked
    # started first (`start_lapsed`), as the job that may have killed its worker.
    lapsed: bool = False
    # When its last parent finished, releasing it (migration 0037; None: no parents, or not
    # timed): a dependant's due time is its enqueue, so its span measures its wait from here.
    released_at: datetime | None = None
    result: str | None = None  # set when the task returned: its JSON, stored on completion


class FailOutcome(NamedTuple):
    """What a fail did: nothing (lease lost), a retry at run_at, or a final failure."""

    owned: bool
    queue: str | None = None
    status: str | None = None
    run_at: datetime | None = None
    has_dependants: bool = False  # jobs wait for it (migration 0017): their queues may be ready


class Announcement(NamedTuple):
    """A worker's claim to be draining a queue until `ttl` from now (pgkick.kick.watch)."""

    watcher: str
    ttl: timedelta


class Snoozed(NamedTuple):
    """A snooze written: due at `run_at`, or `cancelled` (failed, 'cancelled by operator')."""

    run_at: datetime
    cancelled: bool


class WorkerStore(
    ExpiredLeases, HeldLeases, QueueHealing, Listening, ReleasedDependants, StepStore
):
    """What a worker runs (and, from ExpiredLeases, a rescue's sweep of its queue; from
    QueueHealing, the sweep of every queue it makes as it exits; from Listening, a
    lingering worker's wake-up line; from ReleasedDependants, the queues its writes made
    ready for jobs that waited on its jobs; from StepStore, a task's durable steps)."""

    def claim(self, queue: str, *, batch: int, lease: timedelta) -> list[ClaimedJob]:
        """Claim up to `batch` ready jobs of `queue` under a lease: one statement, the
        server-side job_claim (migration 0007; pgkick.store.groups has its rules), in autocommit
        its own transaction, else the caller's (a group's or limit's claim lock is then
        held until that transaction ends)."""
        return _claimed(self._claim(queue, batch=batch, lease=lease))

    def _claim(self, queue: str, *, batch: int, lease: timedelta) -> Any:
        """Send a claim (inside the caller's pipeline, if any); `_claimed` reads its cursor."""
        return self.execute(
            queries.JOB_CLAIM, queue=queue, batch=batch, lease=lease, timed=tracing_loaded()
        )

    def complete(self, job_id: int, attempts: int) -> bool:
        """True if this attempt still held the job and it is now done."""
        rows = self.rows(queries.JOB_COMPLETE, id=job_id, attempts=attempts)
        self._note_released(rows)
        return len(rows) == 1

    def complete_many(self, jobs: Sequence[ClaimedJob]) -> set[int]:
        """Complete a batch in one statement (the server-side job_complete, migration 0010);
        returns the ids this worker still held."""
        if not jobs:
            return set()
        rows = self.rows(
            queries.JOB_COMPLETE_MANY,
            ids=[j.id for j in jobs],
            attempts=[j.attempts for j in jobs],
            results=_results(jobs),
        )
        self._note_released(rows)
        return {row[0] for row in rows}

    def complete_many_and_claim(
        self,
        finished: Sequence[ClaimedJob],
        queue: str,
        *,
        batch: int,
        lease: timedelta,
        announce: Announcement | None = None,
    ) -> tuple[set[int], list[ClaimedJob]]:
        """Complete the last batch, claim the next and (re)announce the worker, in one round
        trip (a pipeline) and one commit. The announcement commits with the claim (see
        pgkick.kick.watch).

        The complete and the claim are one statement, the server-side job_complete_and_claim
        (migration 0008): the client's cost of a statement was most of the worker's CPU a
        job. Inside it the complete runs first: a claim's FOR UPDATE may lock (and skip) a
        row another worker is completing, and holds that lock until it commits; a
        transaction whose claim could run before its own complete (one statement with both
        as CTEs: the executor's order) could then wait for a worker that waits for it.
        Deadlocks seen in the bench's 8-worker drain; with the complete first, only a
        transaction still completing waits for a row, and it waits for one that is
        claiming, which never waits for a row (at most for the queue's claim lock, held by
        a claim). The announcement comes last: whoever holds a watcher row then only
        commits, so no one waits for a job row while holding one."""
        if not finished:
            if announce is None:
                return set(), self.claim(queue, batch=batch, lease=lease)
            with self.pipeline():
                sent = self._claim(queue, batch=batch, lease=lease)
                self._announce(queue, announce)
            return set(), _claimed(sent)
        params = {
            "ids": [j.id for j in finished],
            "attempts": [j.attempts for j in finished],
            "results": _results(finished),
            "queue": queue,
            "batch": batch,
            "lease": lease,
            "timed": tracing_loaded(),
        }
        if announce is None:
            rows = self.rows(queries.JOB_COMPLETE_AND_CLAIM, **params)
        else:
            with self.pipeline():
                sent = self.execute(queries.JOB_COMPLETE_AND_CLAIM, **params)
                self._announce(queue, announce)
            rows = sent.fetchall()
        done = [row for row in rows if row[2] is None]
        self._note_released(done)
        return {row[0] for row in done}, [
            ClaimedJob(*row[:13]) for row in rows if row[2] is not None
        ]

    def _announce(self, queue: str, announce: Announcement) -> None:
        self.execute(
            queries.QUEUE_WATCHER_ANNOUNCE, queue=queue, watcher=announce.watcher, ttl=announce.ttl
        )

    def withdraw_and_claim(
        self,
        queue: str,
        watcher: str,
        *,
        batch: int,
        lease: timedelta,
        unlisten: str | None = None,
    ) -> list[ClaimedJob]:
        """Withdraw the worker's announcement, commit, then claim once more: one round trip
        (which also UNLISTENs `unlisten`, the channel of a worker that lingered listening).

        The order is the protocol (pgkick.kick.watch): the claim's snapshot is taken after
        the withdrawal committed, so it sees every job a producer committed while it
        still counted on this worker."""
        with self.pipeline():
            if unlisten is not None:
                self.unlisten(unlisten)
            self.execute(queries.TRANSACTION_BEGIN)
            self.execute(queries.QUEUE_WATCHER_WITHDRAW, queue=queue, watcher=watcher)
            self.execute(queries.TRANSACTION_COMMIT)
            sent = self._claim(queue, batch=batch, lease=lease)
        return _claimed(sent)

    def start_lapsed(self, jobs: Sequence[ClaimedJob]) -> set[int]:
        """Mark suspects started just before they run (fenced by attempt): the ids still
        held. Sent only for a claim that holds suspects; a fresh claim never pays it."""
        rows = self.rows(
            queries.JOB_LAPSED_START,
            ids=[j.id for j in jobs],
            attempts=[j.attempts for j in jobs],
        )
        return {row[0] for row in rows}

    def withdraw(self, queue: str, watcher: str) -> None:
        self.execute(queries.QUEUE_WATCHER_WITHDRAW, queue=queue, watcher=watcher)

    def ready_exists(self, queue: str) -> bool:
        return bool(self.one(queries.JOB_READY_EXISTS, queue=queue)[0])

    def flow_held(self, queue: str) -> bool:
        """The queue is paused, or its rate holds ready jobs (pgkick.store.flow)."""
        return bool(self.one(queries.QUEUE_FLOW_HELD, queue=queue)[0])

    def fail(
        self,
        job_id: int,
        attempts: int,
        error: str,
        *,
        permanent: bool = False,
        backoff: timedelta | None = None,
        backoff_cap: timedelta | None = None,
        jitter: float | None = None,
    ) -> FailOutcome:
        """Record a failure; a retry waits backoff x 2^attempts (10 s), at most the cap (1 h),
        times `jitter` (the worker's 0.9..1.1, so a storm of retries does not return at once)."""
        rows = self.rows(
            queries.JOB_FAIL,
            id=job_id,
            attempts=attempts,
            error=error,
            permanent=permanent,
            backoff=backoff,
            backoff_cap=backoff_cap,
            jitter=jitter,
        )
        if not rows:
            return FailOutcome(owned=False)
        _, queue, status, run_at, has_dependants = rows[0]
        return FailOutcome(
            owned=True, queue=queue, status=status, run_at=run_at, has_dependants=has_dependants
        )

    def snooze(self, job_id: int, attempts: int, seconds: float) -> Snoozed | None:
        """Back to queued at now + seconds, the attempt given back, or failed if a cancel
        came since the last heartbeat (`cancelled`); None: lease lost."""
        rows = self.rows(queries.JOB_SNOOZE, id=job_id, attempts=attempts, seconds=seconds)
        return Snoozed(run_at=rows[0][0], cancelled=rows[0][1] == "failed") if rows else None

    def enqueue_tick(
        self, name: str, tick_at: datetime, *, queue: str, task: str, payload: str, attempts: int
    ) -> int | None:
        """Insert a periodic tick's job unless this tick was recorded already: its id, or None."""
        rows = self.rows(
            queries.PERIODIC_TICK_ENQUEUE,
            name=name,
            tick_at=tick_at,
            queue=queue,
            task=task,
            payload=payload,
            max_attempts=attempts,
        )
        return int(rows[0][0]) if rows else None


def tracing_loaded() -> bool:
    """Whether this process has loaded OpenTelemetry (an app's SDK, AWS's Lambda layer):
    then each job's run is a span (pgkick.worker.job_span), and the claim returns the times
    it records. Otherwise they stay NULL: three timestamps cost about 2 us a job to format,
    send and parse, and nothing else reads them."""
    return "opentelemetry.trace" in sys.modules


def _claimed(cursor: Any) -> list[ClaimedJob]:
    """The jobs a claim's cursor returned (once its pipeline, if any, is read)."""
    return [ClaimedJob(*row) for row in cursor.fetchall()]


def _results(jobs: Sequence[ClaimedJob]) -> list[str | None] | None:
    """The batch's results for job_complete_many, or NULL when no job returned one (most
    batches): unnest pads a NULL array with NULLs, and one array less is dumped."""
    results = [j.result for j in jobs]
    return results if any(r is not None for r in results) else None
