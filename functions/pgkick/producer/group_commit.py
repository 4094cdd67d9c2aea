"""Group commit: concurrent single enqueues of one process share one transaction and one commit.

Why: with durable commits each COMMIT waits for the disk (a WAL flush), and
that wait, not the insert, is what one enqueue costs. Threads that enqueue at
the same moment can share it. The first caller leads: it sends its own job at
once (a lone caller never waits for company). Callers arriving while a leader's
transaction is in flight queue up; when it ends, the first of them leads the
next group, `BEGIN; INSERT x N; COMMIT;` plus the kick reservations, in one
round trip on one pooled connection (with no kick to reserve, the one INSERT
alone: its own transaction). Each caller returns only after its own
job is committed (durably, if the server's commits are), with its own id.

Errors stay each caller's own. Input is validated before a caller joins, so a
bad payload fails in its caller's hands alone. If the server refuses one row
inside the group's transaction, the transaction is rolled back (nothing of it
exists) and every member inserts its job again alone, on its own thread: the
bad row fails its caller only, and no job can be inserted twice. If the outcome
is unknown (the connection broke around the COMMIT) every member gets the
error, as a lone caller would.

Kicks: the group reserves each ready queue once; the first member with a ready
job in that queue kicks it, the others know a kick is on its way.

Members coming back: threads that enqueue in a loop (a worker pool, a web server
under load) return from a group together, and the first one back found no one
queued and sent its job alone while the others came back behind it: groups went
1, 8, 1, 8 (8 threads: 2.1x one thread's rate, half the round trips carrying one
job). So a group's members count as on their way back: the next leader waits for
them (on a condition, never a poll) until they have all queued again or
`RETURN_WAIT` has passed since the group ended, as PostgreSQL's commit_delay
waits only when commit_siblings are active. A lone caller, and any caller after
a group of one, never waits; a member that does not come back costs the next
leader at most `RETURN_WAIT`, once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from pgkick.connections.db import Clock, in_failed_transaction
from pgkick.connections.pool import LingeringPool
from pgkick.errors import NothingCommitted
from pgkick.store.producer import CommitRoundTrip, ProducerStore, QueuedJob
from pgkick.store.statement import send
from pgkick.validation import JobSpec


@dataclass(eq=False)
class _Member:
    spec: JobSpec
    reserve: bool
    turn: threading.Event = field(default_factory=threading.Event)  # done, or now leading
    job: QueuedJob | None = None
    must_kick: bool = False
    error: BaseException | None = None
    alone: bool = False  # the group was rolled back: insert again by itself


RETURN_WAIT = 0.001  # seconds a leader may wait for the last group's members to queue again


class GroupCommit:
    """The group of one pool and one clock (jobs of one group share their `now`)."""

    def __init__(
        self, pool: LingeringPool, clock: Clock, *, return_wait: float = RETURN_WAIT
    ) -> None:
        self.pool = pool
        self.clock = clock
        self.groups = 0  # transactions of two jobs or more, for tests and the benchmark
        self.return_wait = return_wait
        self._lock = threading.Condition()
        self._waiting: list[_Member] = []
        self._leading = False
        self._returning = 0  # members of the last group not queued again yet
        self._returned_by = 0.0  # when the next leader stops waiting for them

    def insert_and_reserve(
        self, spec: JobSpec, *, reserve: bool, pending: timedelta
    ) -> tuple[QueuedJob, bool]:
        """Insert and commit one validated job, alone or with concurrent ones; then, if
        `reserve`, its queue's kick. Returns the job and whether this caller must kick."""
        me = _Member(spec, reserve)
        with self._lock:
            self._waiting.append(me)
            self._returning = max(0, self._returning - 1)
            lead, self._leading = not self._leading, True
            self._lock.notify_all()
        if not lead:
            me.turn.wait()
        if me.job is None and me.error is None and not me.alone:
            self._lead(pending)  # first, or handed the lead: this member is in the group sent
        if me.alone:
            return self._alone(spec, reserve=reserve, pending=pending)
        if me.error is not None:
            raise me.error
        assert me.job is not None
        return me.job, me.must_kick

    def wait_for_waiting(self, count: int, timeout: float) -> bool:
        """For tests: block until `count` callers queue behind the leader."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self._waiting) >= count, timeout)

    def _lead(self, pending: timedelta) -> None:
        with self._lock:
            left = self._returned_by - time.monotonic()
            if self._returning and left > 0:  # the last group's members are on their way
                self._lock.wait_for(lambda: not self._returning, timeout=left)
            self._returning = 0  # whoever is not back by now comes as a caller of its own
            group, self._waiting = self._waiting, []
        try:
            self._send(group, pending)
        finally:
            with self._lock:
                if len(group) > 1:
                    self._returning = len(group)
                    self._returned_by = time.monotonic() + self.return_wait
                if self._waiting:
                    self._waiting[0].turn.set()  # it leads the next group
                else:
                    self._leading = False
            for member in group:
                member.turn.set()

    def _send(self, group: list[_Member], pending: timedelta) -> None:
        if len(group) == 1:  # a lone caller: the plain single insert
            member = group[0]
            try:
                member.job, member.must_kick = self._alone(
                    member.spec, reserve=member.reserve, pending=pending
                )
            except BaseException as exc:
                member.error = exc
            return
        ready = sorted({m.spec.queue for m in group if m.reserve})
        try:
            with self.pool.connection() as conn:
                jobs, reserved = insert_group_and_reserve(
                    ProducerStore(conn, self.clock),
                    [m.spec for m in group],
                    reserve=ready,
                    pending=pending,
                )
        except NothingCommitted:
            for member in group:
                member.alone = True
            return
        except BaseException as exc:
            for member in group:
                member.error = exc
            return
        self.groups += 1
        for member, job in zip(group, jobs, strict=True):
            member.job = job
            if member.reserve and job.queue in reserved:
                member.must_kick = True
                reserved.discard(job.queue)  # one kick a queue for the whole group

    def _alone(self, spec: JobSpec, *, reserve: bool, pending: timedelta) -> tuple[QueuedJob, bool]:
        with self.pool.connection() as conn:
            return ProducerStore(conn, self.clock).insert_and_reserve(
                spec, reserve=reserve, pending=pending
            )


_groups: dict[tuple[LingeringPool, Clock], GroupCommit] = {}
_groups_lock = threading.Lock()


def group_for(pool: LingeringPool, clock: Clock) -> GroupCommit:
    """The process's group for this pool and clock (made on first use)."""
    with _groups_lock:
        group = _groups.get((pool, clock))
        if group is None:
            group = _groups[(pool, clock)] = GroupCommit(pool, clock)
        return group


def _after_fork_in_child() -> None:
    """A leader of the parent's does not exist in the child: start with no group."""
    global _groups_lock
    _groups_lock = threading.Lock()
    _groups.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def insert_group_and_reserve(
    store: ProducerStore, specs: Sequence[JobSpec], *, reserve: Sequence[str], pending: timedelta
) -> tuple[list[QueuedJob], set[str]]:
    """Insert several jobs and commit them together, then reserve the kicks of `reserve`
    queues: one round trip, one commit (one wait for the disk) for all (this module's point),
    the store's `CommitRoundTrip`.

    With no kick to reserve (no kicker, or only delayed jobs) and one trace context, the
    group is one plain INSERT, its own transaction (`ProducerStore.insert_together`): the
    same one round trip and one commit, without the pipeline's cost.

    Raises NothingCommitted (the server refused a statement inside the transaction,
    which it then rolled back), so each job may be inserted again alone without
    ever existing twice. Any other error leaves the outcome unknown, as for one job."""
    trip = CommitRoundTrip(specs, reserve, pending)
    if not reserve and trip.one_insert:
        return store.insert_together(specs), set()
    answers, error = send(store, trip.statements())
    if error is not None and in_failed_transaction(store.conn):
        store.conn.rollback()  # the COMMIT never ran: the server skipped it after the error
        raise NothingCommitted(f"the group's transaction was rolled back: {error}") from error
    return trip.outcome(answers, error)
