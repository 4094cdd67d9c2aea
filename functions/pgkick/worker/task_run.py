"""Running one task's code and turning what it did into an outcome the worker records.

Why apart from the worker's loop: a task can end in five ways (returned a
result, returned something that cannot be stored, raised, raised
PermanentError, raised Snooze), and each maps to one write. Keeping that
mapping here leaves pgkick.worker.loop about batches, leases and kicks.
"""

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

from pgkick import config
from pgkick.connections.adapters import UnreadableJson
from pgkick.errors import Continuation, PermanentError, Snooze
from pgkick.store.worker import ClaimedJob
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry, describe_error
from pgkick.tasks.results import encode_result
from pgkick.tasks.steps import Steps
from pgkick.worker import job_span, spawn
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.spawn import Spawns

log = logging.getLogger("pgkick.task_run")

CANCELLED = "cancelled by operator"  # last_error of a job cancelled while queued or running

# What a task that takes only its payload is handed (the registry's adapter drops it): its
# job's context and lease flags are never built (about 10 us a job: two threading.Events,
# a frozen dataclass, a closure). Its flags are never set.
UNREAD = JobContext(id=0, queue="", attempt=0, max_attempts=0)

# What a task's code may raise that fails only its own job: any Exception, and SystemExit
# (a library's sys.exit() inside a task). SystemExit is no Exception: it escaped the worker,
# which ended mid-batch, its finished jobs unrecorded and every job of the batch left
# `running` until its lease ran out (a review, 2026-12-05, F2). KeyboardInterrupt still
# stops the worker: an operator's Ctrl-C of a local worker means stop.
TASK_ERRORS = (Exception, SystemExit)


class TaskOutcome(NamedTuple):
    """What the worker records: done with `result` (JSON text or None), a failure
    (`error`, retried unless `permanent`), or a snooze of `snooze` seconds. One a job:
    a NamedTuple, cheaper to make than a frozen dataclass (pgkick.store.worker.ClaimedJob)."""

    error: str | None = None
    permanent: bool = False
    result: str | None = None
    snooze: float | None = None
    continued: bool = False  # out of time for its next step (pgkick.worker.continuation)
    stalled: bool = False  # ... before any step ran in this invocation
    left_ms: int | None = None  # ... with this much time left (less the reserve)
    unstarted: bool = False  # not run: the invocation reached its reserve first (given back)


def run_task(
    registry: Registry,
    job: ClaimedJob,
    keeper: LeaseKeeper,
    steps: Callable[[ClaimedJob], Steps] | None = None,
    spawns: Spawns | None = None,
) -> TaskOutcome:
    """Run the task's code (no transaction is open); never raises for the task's errors.
    With OpenTelemetry loaded, in a span that is a child of the enqueuer's
    (pgkick.worker.job_span). `steps` makes the job's durable step book (none: results
    kept for the run only); `spawns` buffers the children it spawns (none: it cannot)."""
    if not job_span.enabled():
        return _run(registry, job, keeper, None, steps, spawns)
    with job_span.job_span(job) as span:
        outcome = _run(registry, job, keeper, span, steps, spawns)
        # a continuation, like a snooze, is back in the queue with no attempt used
        back = outcome.snooze is not None or outcome.continued
        span.ended(outcome.error, permanent=outcome.permanent, snoozed=back)
        return outcome


def _run(
    registry: Registry,
    job: ClaimedJob,
    keeper: LeaseKeeper,
    span: job_span.JobSpan | None,
    steps: Callable[[ClaimedJob], Steps] | None,
    spawns: Spawns | None,
) -> TaskOutcome:
    if isinstance(job.payload, UnreadableJson):
        return unreadable(job)
    fn = registry.get(job.task) or _reloaded(registry, job.task)
    if fn is None:  # retried: the deploy may be mid-rollout (a newer producer, older worker)
        return TaskOutcome(registry.unknown(job.task) + "; retried until max_attempts", False)
    context = _context(job, keeper, steps, spawns) if registry.takes_job(job.task) else UNREAD
    try:
        value = fn(job.payload, context)
    except Snooze as snooze:
        return TaskOutcome(snooze=snooze.seconds)
    except Continuation as continuation:
        return TaskOutcome(
            continued=True, stalled=continuation.stalled, left_ms=continuation.left_ms
        )
    except PermanentError as exc:
        if span is not None:
            span.raised(exc)
        return TaskOutcome(describe_error(exc), True)
    except TASK_ERRORS as exc:
        if span is not None:
            span.raised(exc)
        return TaskOutcome(describe_error(exc), False)
    try:
        return TaskOutcome(result=encode_result(value))
    except (TypeError, ValueError) as exc:  # the same result would fail every retry
        return TaskOutcome(describe_error(exc), True)


def unreadable(job: ClaimedJob) -> TaskOutcome:
    """A job whose payload Python cannot read (UnreadableJson): failed for good, every
    attempt would read the same."""
    return TaskOutcome(f"payload unreadable: {job.payload}; not run", True)


def _reloaded(registry: Registry, task: str) -> Callable[[Any, JobContext], Any] | None:
    """The task after importing PGKICK_TASKS' modules again (the app may have added it since
    this worker started); None if it is still unknown or the modules fail to import. Only
    the process-wide registry, the one PGKICK_TASKS' modules register into, is reloaded."""
    from pgkick.tasks.registry import registry as app_registry

    if registry is not app_registry:
        return None
    try:
        registry.reload(config.task_modules())
    except Exception as exc:
        log.warning("reloading PGKICK_TASKS for task %r failed: %s", task, exc)
        return None
    return registry.get(task)


def _context(
    job: ClaimedJob,
    keeper: LeaseKeeper,
    steps: Callable[[ClaimedJob], Steps] | None,
    spawns: Spawns | None,
) -> JobContext:
    lost, cancelled = keeper.events(job.id)
    return JobContext(
        id=job.id,
        queue=job.queue,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        lease_lost=lost,
        extend=lambda: keeper.extend(job),
        cancelled=cancelled,
        spawner=None if spawns is None else spawns.spawner(job),
        parents=spawn.parents(keeper.store, job),
        steps=None if steps is None else steps(job),
    )
