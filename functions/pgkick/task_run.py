"""Running one task's code and turning what it did into an outcome the worker records.

Why apart from the worker's loop: a task can end in five ways (returned a
result, returned something that cannot be stored, raised, raised
PermanentError, raised Snooze), and each maps to one write. Keeping that
mapping here leaves pgkick.worker about batches, leases and kicks.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgkick.errors import PermanentError
from pgkick.lease import LeaseKeeper
from pgkick.results import encode_result
from pgkick.store import ClaimedJob
from pgkick.tasks import JobContext, Registry, Snooze, describe_error

CANCELLED = "cancelled by operator"  # last_error of a job cancelled while queued or running


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What the worker records: done with `result` (JSON text or None), a failure
    (`error`, retried unless `permanent`), or a snooze of `snooze` seconds."""

    error: str | None = None
    permanent: bool = False
    result: str | None = None
    snooze: float | None = None


def run_task(registry: Registry, job: ClaimedJob, keeper: LeaseKeeper) -> TaskOutcome:
    """Run the task's code (no transaction is open); never raises for the task's errors."""
    fn = registry.get(job.task)
    if fn is None:
        known = ", ".join(registry.names()) or "none"
        return TaskOutcome(f"unknown task {job.task!r} (this worker knows: {known})", True)
    lost, cancelled = keeper.events(job.id)
    context = JobContext(
        id=job.id,
        queue=job.queue,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        lease_lost=lost,
        extend=lambda: keeper.extend(job),
        cancelled=cancelled,
    )
    try:
        value = fn(job.payload, context)
    except Snooze as snooze:
        return TaskOutcome(snooze=snooze.seconds)
    except PermanentError as exc:
        return TaskOutcome(describe_error(exc), True)
    except Exception as exc:
        return TaskOutcome(describe_error(exc), False)
    try:
        return TaskOutcome(result=encode_result(value))
    except (TypeError, ValueError) as exc:  # the same result would fail every retry
        return TaskOutcome(describe_error(exc), True)
