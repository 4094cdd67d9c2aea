"""One enqueue, decided once: what to insert, how, and whether to reserve its kick; then
carried out by a thin synchronous or asynchronous executor.

Why a plan: the synchronous producer (`pgkick.producer.enqueue`) and the asyncio one
(`pgkick.aio`) make the same decisions: the same checks on the same options, the same
statements, the same rule for when a kick is reserved in the insert's round trip. Each
used to make them itself, and the copies drifted. `EnqueuePlan` makes them, from the
payload and one `EnqueueOptions`, before anything connects (bad input writes nothing);
the executors below only run its statements on a store or an AsyncConnection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pgkick.connections.aio_db import AsyncConnection
from pgkick.connections.db import Clock
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.producer import trace_context
from pgkick.producer.options import EnqueueOptions
from pgkick.store import producer as statements
from pgkick.store import unique
from pgkick.store.producer import ProducerStore, QueuedJob
from pgkick.store.statement import Steps, drive, drive_async
from pgkick.validation import DEFAULT_MAX_PAYLOAD_BYTES, JobSpec, job_spec, job_spec_of


def now(clock: Clock) -> datetime:
    """The clock's instant, or this machine's (the server's now() is not known here)."""
    return clock() or datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class EnqueuePlan:
    """One validated job, and whether its kick is reserved in the insert's round trip.

    `reserve`: the job is due now, has no unique key (a duplicate reserving a kick would
    make other producers wait for a kick never sent: a unique job's kick is reserved
    once it is known to be new) and the kicker sends kicks (NoKicker would reserve one
    it never sends)."""

    spec: JobSpec
    reserve: bool = False

    @classmethod
    def build(
        cls,
        payload: Any,
        task: str,
        options: EnqueueOptions,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> EnqueuePlan:
        """Check everything; raises ValueError/TypeError naming the first bad field. Nothing
        is reserved (a transaction's enqueuer kicks after the app's commit).

        The trace context is taken here, in the caller's thread and task: a group commit's
        leader or a joined transaction's commit may insert the job from another."""
        spec = job_spec(payload, task=task, max_payload_bytes=max_payload_bytes, **options)
        trace = trace_context.current()
        if trace is not None:
            spec = spec._replace(traceparent=trace[0], tracestate=trace[1])
        return cls(spec)

    def reserving(self, kicker: Kicker, clock: Clock) -> EnqueuePlan:
        """The plan of an enqueue that commits by itself, then kicks through `kicker`."""
        spec = self.spec
        if isinstance(kicker, NoKicker) or spec.unique_key is not None:
            return self
        due_now = spec.run_at <= now(clock) if spec.run_at else spec.delay <= timedelta(0)
        return EnqueuePlan(spec, reserve=due_now)

    @property
    def unique(self) -> bool:
        return self.spec.unique_key is not None

    def steps(self) -> Steps[tuple[QueuedJob, bool]]:
        """Insert the job on a connection (in its transaction, if any): the job and True,
        or the live job holding its unique key and False (nothing written)."""
        if self.unique:
            row, inserted = yield from unique.insert_one(self.spec)
            return QueuedJob._make(row), inserted
        rows = yield statements.insert(self.spec)
        return QueuedJob._make(rows[0]), True


def execute_sync(store: ProducerStore, plan: EnqueuePlan) -> tuple[QueuedJob, bool]:
    """Carry out a plan's insert on a store: (the job, whether it was inserted)."""
    return drive(store, plan.steps())


async def execute_async(
    conn: AsyncConnection, clock: Clock, plan: EnqueuePlan
) -> tuple[QueuedJob, bool]:
    """Carry out a plan's insert on an AsyncConnection: (the job, whether it was inserted)."""
    return await drive_async(conn, clock, plan.steps())


def job_specs(jobs: Sequence[tuple[int, Mapping[str, Any]]], max_bytes: int) -> list[JobSpec]:
    """enqueue_many's jobs (each with its index in the batch), checked, with the caller's
    trace context (taken once a chunk: one enqueue_many is one span's)."""
    specs = [job_spec_of(job, max_bytes, index) for index, job in jobs]
    trace = trace_context.current()
    if trace is None:
        return specs
    return [spec._replace(traceparent=trace[0], tracestate=trace[1]) for spec in specs]
