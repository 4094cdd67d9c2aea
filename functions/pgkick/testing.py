"""Testing modes for an app's own tests: see its tasks run without Lambda or a kicker.

Why against the real database and the real worker loop: a mode that ran tasks
from a Python list would pass tests that production fails (a payload jsonb
changes, a job committed in a transaction that rolled back, a fenced write).
Both modes install a kicker as pgkick's default for the duration of a `with`:

- `inline(dsn)`: each kick drains its queue in-process, right after the commit,
  through the same claim / complete statements and fencing a Lambda worker uses.
  A job due later (delay, run_at, a retry's backoff) is not run: it stays queued.
- `manual(dsn)`: jobs stay queued; `enqueued(task=...)` returns their payloads,
  `drain()` runs every ready job the same way inline mode does.

    def test_checkout_sends_a_receipt(dsn):
        with pgkick.testing.inline(dsn) as jobs:
            shop.checkout(order=42)               # send_receipt.enqueue_and_kick(...)
        assert jobs.ran(task="send_receipt") == [{"order": 42}]

An exception a task raises is kept (the worker turns it into a retry or a failure,
as in production) and raised again when the `with` block ends, so a broken task
fails the test that ran it; `raise_errors=False` leaves them in `.errors`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from pgkick import config
from pgkick.connections import linger
from pgkick.kick.default import set_default_kicker
from pgkick.store import queries
from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.worker import WorkerStore
from pgkick.tasks.registry import JobContext, Registry, registry
from pgkick.worker.loop import Worker, WorkerOptions

OPTIONS = WorkerOptions(
    batch=10, lease=timedelta(minutes=5), min_remaining=timedelta(0), max_fanout=0, heartbeat=False
)


class _Recording(Registry):
    """The app's registry, seen through: records each run and keeps what tasks raise."""

    def __init__(self, tasks: Registry) -> None:
        super().__init__()
        self.tasks = tasks
        self.runs: list[tuple[str, Any]] = []
        self.errors: list[BaseException] = []

    def names(self) -> list[str]:
        return self.tasks.names()

    def takes_job(self, name: str) -> bool:
        return self.tasks.takes_job(name)

    def get(self, name: str) -> Callable[[Any, JobContext], Any] | None:
        fn = self.tasks.get(name)
        if fn is None:
            return None

        def recorded(payload: Any, job: JobContext) -> Any:
            self.runs.append((name, payload))
            try:
                return fn(payload, job)
            except BaseException as exc:
                self.errors.append(exc)
                raise  # the worker records the failure or the retry, as in production

        return recorded


class TestQueue:
    """The jobs of one test: what ran, what is queued, and a way to run them."""

    __test__ = False  # not a pytest test class

    def __init__(self, dsn: str, tasks: Registry, *, inline: bool) -> None:
        self.dsn = dsn
        self.inline = inline
        self.recording = _Recording(tasks)
        self.kicks: list[str] = []  # queues kicked, in order
        self.wakes: list[tuple[str, datetime]] = []  # wake-ups booked for later jobs
        self._lock = threading.Lock()
        self._draining = False
        self._again: set[str] = set()

    # -- the Kicker protocol ------------------------------------------------------
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.kicks.append(queue)
        if self.inline:
            self._run({queue})

    def wake_at(self, queue: str, when: datetime) -> None:
        self.wakes.append((queue, when))

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        """Nothing dies in-process: no rescue is needed."""

    def cancel_rescue(self, name: str) -> None:
        """See book_rescue."""

    # -- what a test asserts on ---------------------------------------------------
    @property
    def errors(self) -> list[BaseException]:
        return self.recording.errors

    def ran(self, task: str | None = None) -> list[Any]:
        """Payloads of the jobs run so far (every attempt), in order; of `task` if given."""
        return [payload for name, payload in self.recording.runs if task in (None, name)]

    def enqueued(self, task: str | None = None, queue: str | None = None) -> list[Any]:
        """Payloads of the jobs still queued (oldest first), of `task` / `queue` if given."""
        with MaintenanceStore.open(self.dsn) as store:
            rows = store.dicts(queries.JOB_LIST_QUEUED, task=task, queue=queue)
        return [row["payload"] for row in rows]

    def drain(self) -> int:
        """Run every job that is ready now, in every queue; how many ran."""
        with MaintenanceStore.open(self.dsn) as store:
            queues = set(store.ready_by_queue())
        before = len(self.recording.runs)
        self._run(queues)
        return len(self.recording.runs) - before

    def _run(self, queues: set[str]) -> None:
        """Drain `queues` (and any queue kicked meanwhile) in this thread; a kick that comes
        while another drain runs (a task enqueueing a follow-up) is left to that drain."""
        with self._lock:
            self._again |= queues
            if self._draining:
                return
            self._draining = True
        try:
            while True:
                with self._lock:
                    if not self._again:
                        self._draining = False
                        return
                    queue = min(self._again)
                    self._again.discard(queue)
                with WorkerStore.open(self.dsn) as store:
                    # the worker takes up the producer's pending kick, so the next job kicks
                    Worker(store, self.recording, self, OPTIONS).drain(queue, lambda: 600_000)
        except BaseException:
            with self._lock:
                self._draining = False
            raise


@contextmanager
def _installed(
    dsn: str | None, tasks: Registry, *, inline: bool, raise_errors: bool
) -> Iterator[TestQueue]:
    dsn = dsn or config.database_url()
    mode = TestQueue(dsn, tasks, inline=inline)
    previous_kicker = set_default_kicker(mode)
    previous_url = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = dsn  # the app's enqueue_and_kick(...) commits here
    try:
        yield mode
    finally:
        set_default_kicker(previous_kicker)
        if previous_url is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous_url
        linger.close_all()
    if raise_errors and mode.errors:
        first = mode.errors[0]
        raise AssertionError(f"a pgkick task raised: {type(first).__name__}: {first}") from first


def inline(
    dsn: str | None = None, *, tasks: Registry = registry, raise_errors: bool = True
) -> AbstractContextManager[TestQueue]:
    """Jobs run in-process right after their commit (see the module's docstring)."""
    return _installed(dsn, tasks, inline=True, raise_errors=raise_errors)


def manual(
    dsn: str | None = None, *, tasks: Registry = registry, raise_errors: bool = True
) -> AbstractContextManager[TestQueue]:
    """Jobs stay queued until `drain()` (see the module's docstring)."""
    return _installed(dsn, tasks, inline=False, raise_errors=raise_errors)
