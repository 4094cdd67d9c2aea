"""A claim's jobs run in order, a batch task's jobs together: one outcome per job.

Why here, apart from the loop: the loop records outcomes (fenced by attempt, one
write per job, successes completed together) and need not know whether a job ran
alone or in a batch; this module turns a claim into `(job, outcome)` pairs, the
same `TaskOutcome` a plain task's run gives (pgkick.worker.task_run). So a batch
keeps every guarantee of a plain job by construction: the keeper holds and
extends every job of the claim while the batch runs, a job whose lease was lost
is not written, a failed job is retried alone by its own attempts and backoff,
and each done job stores its own result.

A batch task's jobs of one claim run at the first of them, in groups of at most
its `batch`; the other jobs keep their order around it. Suspects (jobs whose last
attempt's worker vanished) run after the rest of the claim, grouped among themselves.

`batch_window` (`BatchWindow`) never makes a worker wait: after a *full* claim (more
jobs are ready now), a batch task's group short of `batch` may be held back, its
leases kept by the heartbeat, and topped up by the next claim, made at once. A
short or empty claim, the window running out (measured from the first job held),
or the worker running out of time runs what is held at once (gives it back to the
queue if the worker is down to its reserve: `run_jobs`' `out_of_time`). So nothing idles on
an empty queue, and a job waits at most the window plus one claim's run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from typing import Any

from pgkick.connections.adapters import UnreadableJson
from pgkick.errors import PermanentError, Snooze
from pgkick.store.worker import ClaimedJob
from pgkick.tasks.batch import BatchSpec, settle
from pgkick.tasks.registry import Registry, describe_error
from pgkick.tasks.results import encode_result
from pgkick.tasks.steps import Steps
from pgkick.worker.lease import LeaseKeeper
from pgkick.worker.spawn import Spawns
from pgkick.worker.task_run import TASK_ERRORS, TaskOutcome, run_task, unreadable

log = logging.getLogger("pgkick.batch_run")

# The outcome of a job not run because its lease was already lost (the loop reads the
# keeper's mark first and writes nothing).
NOT_STARTED = TaskOutcome(error="not started: its lease was lost")
# The outcome of a job not run because the invocation reached its reserve first (the loop
# gives it back to the queue, its attempt not used, and hands the queue over).
OUT_OF_TIME = TaskOutcome(unstarted=True)


def run_jobs(
    registry: Registry,
    jobs: list[ClaimedJob],
    keeper: LeaseKeeper,
    steps: Callable[[ClaimedJob], Steps] | None = None,
    spawns: Spawns | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
    start_lapsed: Callable[[list[ClaimedJob]], None] | None = None,
) -> Iterator[tuple[ClaimedJob, TaskOutcome]]:
    """Each job of the claim with its outcome, produced as it ends (the loop flushes
    completions of a slow claim as they come). `steps`: a plain task's durable step book
    (run_task's), `spawns` its spawned children's buffer; a batch task's call has no
    JobContext, so no steps and no spawns. `out_of_time`: asked before each job (or batch
    call) starts; once True, every job not started yet is OUT_OF_TIME, not run.

    Suspects (`lapsed`: their last attempt's worker vanished, migration 0035) run after the
    others, each kept order: one of them may be the job that kills its worker, and the jobs
    run before it are then recorded, not charged. `start_lapsed` is called with each
    suspect (or a batch call's suspects) just before it starts: the loop records what is
    held and marks them started (a mark it cannot make marks the job lost: not started)."""
    if start_lapsed is None or not any(job.lapsed for job in jobs):
        yield from _in_order(registry, jobs, keeper, steps, spawns, out_of_time, None)
        return
    fresh = [job for job in jobs if not job.lapsed]
    suspects = [job for job in jobs if job.lapsed]
    late = yield from _in_order(registry, fresh, keeper, steps, spawns, out_of_time, None)
    yield from _in_order(
        registry, suspects, keeper, steps, spawns, lambda: late or out_of_time(), start_lapsed
    )


def _in_order(
    registry: Registry,
    jobs: list[ClaimedJob],
    keeper: LeaseKeeper,
    steps: Callable[[ClaimedJob], Steps] | None,
    spawns: Spawns | None,
    out_of_time: Callable[[], bool],
    start: Callable[[list[ClaimedJob]], None] | None,
) -> Generator[tuple[ClaimedJob, TaskOutcome], None, bool]:
    """run_jobs' walk of `jobs` in order, each started by `start` first if given; returns
    whether the reserve was reached."""
    groups: dict[str, list[ClaimedJob]] = {}
    for job in jobs:
        if registry.batch(job.task) is not None:
            groups.setdefault(job.task, []).append(job)
    late = False  # the reserve was reached: nothing more starts
    for job in jobs:
        group = groups.get(job.task)
        if group is not None and not group:
            continue  # its batch group ran (or was given back) at the first of them
        late = late or out_of_time()
        if group is None:
            if start is not None and not late and not keeper.is_lost(job.id):
                start([job])
            # A job whose lease is known lost (a heartbeat found it re-held) may be running
            # elsewhere now: not started here (the loop writes nothing for it).
            if late:
                yield job, OUT_OF_TIME
            elif keeper.is_lost(job.id):
                yield job, NOT_STARTED
            else:
                yield job, run_task(registry, job, keeper, steps, spawns)
            continue
        spec = registry.batch(job.task)  # the first of its task in the claim: the group runs
        assert spec is not None
        for first in range(0, len(group), spec.size):
            late = late or (first > 0 and out_of_time())
            members = group[first : first + spec.size]
            unmarked = [m for m in members if not keeper.is_lost(m.id)]
            if start is not None and not late and unmarked:
                start(unmarked)
            held = []  # each job asked once: the heartbeat may mark one meanwhile
            for member in members:
                if late:
                    yield member, OUT_OF_TIME
                elif keeper.is_lost(member.id):
                    yield member, NOT_STARTED
                elif isinstance(member.payload, UnreadableJson):
                    yield member, unreadable(member)
                else:
                    held.append(member)
            if held:
                yield from run_batch(spec, held)
        group.clear()
    return late


def run_batch(spec: BatchSpec, jobs: list[ClaimedJob]) -> list[tuple[ClaimedJob, TaskOutcome]]:
    """One call of the batch task (no transaction is open); never raises for its errors.

    A job whose payload cannot be rebuilt into the declared type fails alone, as a plain
    task whose loader raised does; the others still run."""
    outcomes: dict[int, TaskOutcome] = {}
    items: list[Any] = []
    for job in jobs:
        try:
            items.append(spec.item(job.id, job.payload, job.attempts, job.max_attempts, job.queue))
        except Exception as exc:
            outcomes[job.id] = TaskOutcome(describe_error(exc), False)
    if items:
        outcomes.update(_call(spec, items))
    return [(job, outcomes[job.id]) for job in jobs]


def _call(spec: BatchSpec, items: list[Any]) -> dict[int, TaskOutcome]:
    """The task gets a list of its own: one it empties or reorders as it works (popping the
    items it has sent) must not take the jobs' outcomes with it; `settle` reads ours."""
    try:
        settled = settle(items, spec.fn(list(items)))
    except TASK_ERRORS as exc:  # the whole batch: each job by its own attempts
        every = outcome_of(exc)
        log.warning("batch of %s jobs failed as a whole: %s", len(items), every.error or "snooze")
        return {item.id: every for item in items}
    return {job_id: outcome_of(value) for job_id, value in settled.items()}


def outcome_of(value: object) -> TaskOutcome:
    """What one item's outcome means, as pgkick.worker.task_run maps a plain task's ending:
    Snooze, PermanentError, another Exception, or a result that must be storable."""
    if isinstance(value, Snooze):
        return TaskOutcome(snooze=value.seconds)
    if isinstance(value, PermanentError):
        return TaskOutcome(describe_error(value), True)
    if isinstance(value, TASK_ERRORS):  # (a whole batch's SystemExit, from _call)
        return TaskOutcome(describe_error(value), False)
    try:
        return TaskOutcome(result=encode_result(value))
    except (TypeError, ValueError) as exc:  # the same result would fail every retry
        return TaskOutcome(describe_error(exc), True)


class BatchWindow:
    """Jobs of batch tasks held back between claims of one drain (see the module's doc)."""

    def __init__(self, registry: Registry, monotonic: Callable[[], float]) -> None:
        self.registry = registry
        self.monotonic = monotonic
        self.held: list[ClaimedJob] = []
        self._since: dict[str, float] = {}  # task: when its oldest held job was held

    def take(self, claimed: list[ClaimedJob], *, full: bool) -> list[ClaimedJob]:
        """What to run now: the held jobs (oldest first) and this claim's, less the batch
        groups a full claim leaves short, held for the next claim while their window lasts.

        A held job met again in the claim was taken over meanwhile (its lease ran out,
        the reaper gave it back) and claimed anew: its old attempt is dropped unrun."""
        again = {job.id for job in claimed}
        jobs = [job for job in self.held if job.id not in again] + claimed
        self.held = []
        if not full:
            self._since.clear()
            return jobs
        groups: dict[str, list[ClaimedJob]] = {}
        for job in jobs:
            spec = self.registry.batch(job.task)
            if spec is not None and spec.window.total_seconds() > 0:
                groups.setdefault(job.task, []).append(job)
        now = self.monotonic()
        for task, group in groups.items():
            spec = self.registry.batch(task)
            assert spec is not None
            short = len(group) % spec.size
            since = self._since.setdefault(task, now)
            if short == 0 or now - since >= spec.window.total_seconds():
                del self._since[task]  # a full group, or the window is over: run them all
                continue
            self.held += group[-short:]
        if not self.held:
            return jobs
        holding = {job.id for job in self.held}
        return [job for job in jobs if job.id not in holding]

    def release(self) -> list[ClaimedJob]:
        """Everything held, to run now (the queue is empty, or time runs short)."""
        jobs, self.held = self.held, []
        self._since.clear()
        return jobs
