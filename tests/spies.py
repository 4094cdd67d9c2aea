"""Test doubles that watch the real code instead of replacing it.

Why: a guarantee such as "no write for a lost job" or "the kick comes after the
commit" cannot be seen in the final rows (a fenced write changes nothing, and a
kick just before the commit leaves the same rows as one just after), so these
record what the code did at the moment it did it (see also `tests.commit_witness`):

- `CheckedRegistry`: a task registry that keeps every AssertionError a task
  raises. The worker turns a task's exception into a job failure, so an assert
  inside a task can never fail a test by itself; `reraise()` (and the
  `checked_tasks` fixture, at teardown) raises it in the test.
- `WatchedStore`: a JobStore that logs every statement it sends (name and
  parameters), counts the lease keeper's batch extensions, and can park the
  heartbeat thread before its next extension.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, LiteralString

from pgkick.connections.db import Cursor
from pgkick.store.worker import ClaimedJob
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from tests.store import JobStore

WAIT = 10.0  # seconds: only a broken guarantee ever waits this long

WRITES = frozenset({"job_complete", "job_complete_many", "job_complete_and_claim", "job_fail"})


class CheckedRegistry(Registry):
    """A Registry whose tasks' AssertionErrors are kept, to be raised after the drain."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[AssertionError] = []

    def get(self, name: str) -> Callable[[Any, JobContext], Any] | None:
        fn = super().get(name)
        if fn is None:
            return None

        def checked(payload: Any, job: JobContext) -> Any:
            try:
                return fn(payload, job)
            except AssertionError as exc:
                self.errors.append(exc)
                raise  # the worker still sees a failed task, as it would in production

        return checked

    def reraise(self) -> None:
        """Raise the first AssertionError a task raised (the worker swallowed it)."""
        if self.errors:
            first, self.errors = self.errors[0], []
            raise AssertionError(f"a task's assertion failed: {first}") from first


@dataclass(frozen=True, slots=True)
class Statement:
    name: str  # the sql/ file's name, e.g. "job_complete_many"
    params: dict[str, Any]

    def mentions(self, job_id: int) -> bool:
        ids = self.params.get("ids") or []
        return self.params.get("id") == job_id or job_id in ids


class WatchedStore(JobStore):
    """A real JobStore that logs its statements and lets a test pace the heartbeat."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.statements: list[Statement] = []
        self.extensions = 0  # extend_many calls finished (the heartbeat's ticks)
        self._ticked = threading.Condition()
        self._open = threading.Event()
        self._open.set()
        self._parked = threading.Event()

    def _execute_on(self, cur: Cursor, query: LiteralString, params: dict[str, Any]) -> Cursor:
        name = query.split(":", 1)[0].removeprefix("-- ").strip()
        self.statements.append(Statement(name, dict(params)))
        return super()._execute_on(cur, query, params)

    def writes_for(self, job_id: int) -> list[Statement]:
        """Every complete or fail statement this store sent that names the job."""
        return [s for s in self.statements if s.name in WRITES and s.mentions(job_id)]

    def extend_many(self, jobs: Sequence[ClaimedJob], lease: timedelta) -> dict[int, bool]:
        if not self._open.is_set():
            self._parked.set()
            if not self._open.wait(WAIT):
                raise AssertionError(f"the heartbeat stayed parked for {WAIT} s")
        try:
            return super().extend_many(jobs, lease)
        finally:
            with self._ticked:
                self.extensions += 1
                self._ticked.notify_all()

    def wait_extensions(self, count: int) -> None:
        """Return once `count` more batch extensions have finished (fails after WAIT s).

        Waiting for two guarantees one that started after the caller's last move."""
        with self._ticked:
            target = self.extensions + count
            if not self._ticked.wait_for(lambda: self.extensions >= target, WAIT):
                raise AssertionError(f"the heartbeat extended no lease in {WAIT} s")

    def park_heartbeat(self) -> None:
        """Hold the heartbeat before its next extension; returns once it is held there,
        so no extension is in flight until `release_heartbeat()`."""
        self._parked.clear()
        self._open.clear()
        if not self._parked.wait(WAIT):
            raise AssertionError(f"the heartbeat did not come to extend in {WAIT} s")

    def release_heartbeat(self) -> None:
        self._open.set()
