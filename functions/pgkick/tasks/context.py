"""What a task is handed beside its payload: `JobContext`.

Why apart from the registry: the registry maps names to functions; the context is what a
running job offers its task (ids for idempotency keys, the lease's stop signal, a cancel,
durable steps, spawning children, its parents' results), built by the worker for each run
(pgkick.worker.task_run) and by the test kit (pgkick.testing). Its worker-side powers are
callables the worker sets, so a context made by hand (a unit test) still works, saying
what it cannot do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pgkick.errors import MisuseError
from pgkick.tasks.steps import Steps


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a task may want beyond its payload: ids for idempotency keys, and a stop signal."""

    id: int
    queue: str
    attempt: int
    max_attempts: int
    lease_lost: threading.Event = field(default_factory=threading.Event)
    extend: Callable[[], bool] = lambda: True
    # Set when an operator ran `pgkick cancel` on this running job (seen by the heartbeat):
    # stop soon; whatever the task then returns or raises, the job ends failed.
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Jobs that wait for others (issue 34), set by the worker (pgkick.worker.spawn): spawn
    # children, written with this run's completion, and read this job's parents' results.
    spawner: Callable[[Iterable[Mapping[str, Any]]], list[int]] | None = None
    parents: Callable[[], dict[int, Any]] | None = None

    def spawn(self, payload: Any, *, task: str, **options: Any) -> int:
        """Spawn one child of this job (see spawn_many); returns its id."""
        return self.spawn_many([{"payload": payload, "task": task, **options}])[0]

    def spawn_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Spawn children (enqueue_many's mappings, `after=` included; not unique_key,
        debounce or throttle) and return their ids at once. Checked now (bad input raises
        here, nothing written), but written only in the transaction that completes this
        run: if it ends any other way (a failure, a retry, a sleep, a continuation, a lost
        lease, a crash), no child ever exists, and the next run spawns afresh. A join is a
        child with `after=` the others' ids: it runs once they all finished. Not inside
        `job.step` (a replay would return ids whose children were never written)."""
        if self.spawner is None:
            raise MisuseError("spawn: only a task run by a pgkick worker can spawn jobs")
        if self.steps is not None and self.steps.running:
            raise MisuseError(
                "spawn: not inside job.step: a replay returns the step's stored result "
                "without running it, so children spawned there would never be written; "
                "spawn outside the step (each run of the task spawns them again, and they "
                "are written once, when the job completes)"
            )
        return self.spawner(jobs)

    def parent_results(self) -> dict[int, Any]:
        """The results of this job's parents (`after=`) that ended done, by job id; a parent
        that failed under 'run anyway' is absent."""
        if self.parents is None:
            raise MisuseError("parent_results: only a task run by a pgkick worker has parents")
        return self.parents()

    # Durable steps (pgkick.tasks.steps): the worker hands in its job's book; a context
    # made by hand gets one that keeps results for the run only, at the first step.
    steps: Steps | None = None

    def step[R](self, name: str, fn: Callable[..., R], *args: Any) -> R:
        """`fn(*args)`, run once for this job: a retry or a continuation returns the stored
        result. The result must be JSON (what a replay returns: tuples come back lists)."""
        return self._steps().run(name, fn, args)  # type: ignore[no-any-return]

    def sleep(self, seconds: float, name: str | None = None) -> None:
        """End this run and resume the task after `seconds` (the job waits in the queue, a
        wake-up booked, no attempt used); the task then replays its steps up to here."""
        self._steps().sleep(seconds, name)

    def _steps(self) -> Steps:
        steps = self.steps
        if steps is None:
            steps = Steps()
            object.__setattr__(self, "steps", steps)  # frozen: set once, for this run
        return steps

    def extend_lease(self) -> bool:
        """Push this job's lease forward now; False means stop: the job is someone else's."""
        return self.extend()

    @property
    def idempotency_key(self) -> str:
        return f"pgkick-{self.id}"
