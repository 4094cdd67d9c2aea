"""Testing modes for an app's own tests: see its tasks run without Lambda or a kicker.

Why against the real database and the real worker loop: a mode that ran tasks
from a Python list would pass tests that production fails (a payload jsonb
changes, a job committed in a transaction that rolled back, a fenced write).
Both modes install a kicker as pgkick's default for the duration of a `with`:

- `inline(dsn)`: each kick drains its queue in-process, right after the commit,
  through the same claim / complete statements and fencing a Lambda worker uses.
  A job due later (delay, run_at, a retry's backoff) is not run: it stays queued.
- `manual(dsn)`: jobs stay queued; `enqueued(task=...)` returns their payloads,
  `drain()` runs every ready job the same way inline mode does, and the jobs those
  runs make ready (children, dependants, follow-ups), in any queue.

Why a clock of the block's own (`advance(seconds)`): a job due later could otherwise be
run only by sleeping it out. The first advance reads the server's now() and from then on
every statement of the process (the app's enqueues, the kit's worker) takes that instant,
moved by each advance and still between them (pgkick.connections.db.set_moved_clock):
a retry, a snooze or a delay is due when the test says so, and nothing runs by chance of
the machine's speed. Inline, an advance runs what fell due, as its wake-up would.

Why a block sees only its own jobs: it notes the highest job id when it starts,
and `enqueued()`, `assert_enqueued()` and `assert_not_enqueued()` read only the
jobs above it, so a job an earlier test left behind cannot fail the next one
(the pytest plugin's fixtures go further: a database of the test's own). A
block refuses a database without pgkick's schema at its start, saying to
migrate; and inside it a task name the registry does not know is refused at
enqueue (pgkick.errors.UnknownTask), as after `pgkick.load_tasks()`.

An exception a task raises is kept (the worker turns it into a retry or a failure,
as in production) and raised again when the `with` block ends (not a snooze, a sleep or a
continuation: the job is handed back, not failed), so a broken task
fails the test that ran it; `raise_errors=False` leaves them in `.errors`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from pgkick import config, validation
from pgkick.connections import linger
from pgkick.connections.db import set_moved_clock
from pgkick.errors import Continuation, InvalidArgument, InvalidArgumentType, Snooze, StepRefused
from pgkick.kick.default import set_default_kicker
from pgkick.store import migrations, queries
from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.worker import WorkerStore
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry, registry
from pgkick.testing import asserts
from pgkick.worker.loop import Worker, WorkerOptions

# What a task raises to hand its job back to the worker, not to fail it: `job.sleep` and
# `pgkick.Snooze` re-queue it, a continuation moves it to a fresh invocation, a refused step
# means another attempt holds it. The block must not raise them as the task's errors.
CONTROL_FLOW = (Snooze, Continuation, StepRefused)

OPTIONS = WorkerOptions(
    batch=10, lease=timedelta(minutes=5), min_remaining=timedelta(0), max_fanout=0, heartbeat=False
)
"""The worker options the inline and manual modes drain with: claims of 10, a 5-minute
lease, no time reserve (no Lambda clock in a test), no fan-out to other workers, and no
heartbeat (a lease is extended only when the task calls `job.extend_lease()`)."""


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
            except CONTROL_FLOW:
                raise  # a snooze, a sleep, a continuation: the worker's, not a failure
            except BaseException as exc:
                self.errors.append(exc)
                raise  # the worker records the failure or the retry, as in production

        return recorded


class TestQueue:
    """The jobs of one test: what ran, what is queued, and a way to run them."""

    __test__ = False  # not a pytest test class

    def __init__(self, dsn: str, tasks: Registry, *, inline: bool, after: int = 0) -> None:
        self.dsn = dsn
        self.after = after  # the highest job id before this block: its jobs are above
        self.inline = inline
        self.recording = _Recording(tasks)
        self.kicks: list[str] = []  # queues kicked, in order
        self.wakes: list[tuple[str, datetime]] = []  # wake-ups booked for later jobs
        self._lock = threading.Lock()
        self._draining = False
        self._again: set[str] = set()
        self._now: datetime | None = None  # None: the server's now(); set by advance()

    # -- the Kicker protocol ------------------------------------------------------
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        """Inline: drain `queue` now. Manual: only while drain() runs, so that what its jobs
        make ready (a dependant released, a child spawned, a follow-up enqueued) runs in it
        whatever its queue, as the worker's drain of the same queue takes it anyway."""
        self.kicks.append(queue)
        if self.inline or self._draining:
            self._run({queue})

    def wake_at(self, queue: str, when: datetime) -> None:
        """Listed once: a worker books a retry's wake-up and its sweep on leaving books it
        again, which LambdaKicker's booker (one schedule per queue and minute) makes once."""
        with self._lock:
            if (queue, when) not in self.wakes:
                self.wakes.append((queue, when))

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        """Nothing dies in-process: no rescue is needed."""

    def cancel_rescue(self, name: str) -> None:
        """See book_rescue."""

    # -- what a test asserts on ---------------------------------------------------
    @property
    def errors(self) -> list[BaseException]:
        return self.recording.errors

    def ran(self, task: object = None) -> list[Any]:
        """Payloads of the jobs run so far (every attempt), in order; of `task` (a name or
        a handle, as jobs() and the assertions take) if given."""
        wanted = asserts.task_name(task)
        return [payload for name, payload in self.recording.runs if wanted in (None, name)]

    def jobs(
        self, task: object = None, queue: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        """This block's jobs (id, queue, task, payload, status, attempts, run_at), in id
        order; of `task` (a name or a handle), `queue`, `status` if given."""
        with MaintenanceStore.open(self.dsn) as store:
            return store.dicts(
                queries.JOB_LIST_SINCE,
                after=self.after,
                task=asserts.task_name(task),
                queue=queue,
                status=status,
            )

    def enqueued(self, task: object = None, queue: str | None = None) -> list[Any]:
        """Payloads of this block's jobs still queued (oldest first), of `task` / `queue`."""
        return [row["payload"] for row in self.jobs(task, queue, "queued")]

    def assert_enqueued(
        self, task: object, *, payload: Any = asserts.ANY, queue: str | None = None
    ) -> dict[str, Any]:
        """The first job of `task` this block enqueued (whatever became of it since), with
        this payload and queue when given; an AssertionError listing what was enqueued
        instead. In the style of River's rivertest.RequireInserted."""
        return asserts.require(self.jobs(), task, payload, queue)

    def assert_not_enqueued(
        self, task: object, *, payload: Any = asserts.ANY, queue: str | None = None
    ) -> None:
        """An AssertionError naming the job if this block enqueued one of `task` (with this
        payload and queue when given)."""
        asserts.refuse(self.jobs(), task, payload, queue)

    def drain(self) -> int:
        """Run every job that is ready now, in every queue, and those their runs make ready
        (children, dependants, follow-ups); how many ran."""
        with MaintenanceStore.open(self.dsn) as store:
            queues = set(store.ready_by_queue())
        before = len(self.recording.runs)
        self._run(queues)
        return len(self.recording.runs) - before

    def now(self) -> datetime | None:
        """The block's instant once advance() moved it (every statement takes it), else None:
        the server's now(), moving on its own."""
        return self._now

    def advance(self, seconds: float | timedelta) -> int:
        """Move the block's time forward (and stop it there) without sleeping: a retry's
        backoff, a snooze, a delay or a run_at falls due. Inline, runs what is then ready
        (as its wake-up would, and what those runs make ready); manual leaves it to drain().
        How many ran."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float | timedelta):
            raise InvalidArgumentType(
                f"advance: seconds as a number or a timedelta, got {type(seconds).__name__}"
            )
        if not isinstance(seconds, timedelta) and not -1e9 < seconds < 1e9:  # NaN, inf too
            raise InvalidArgument(f"advance: {seconds!r} seconds is not a time to move by")
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        if step < timedelta(0):
            raise InvalidArgument(f"advance: time only moves forward, got {step}; nothing moved")
        now = self._now
        if now is None:  # from the server's now(): what the jobs so far were timed by
            with MaintenanceStore.open(self.dsn) as store:
                now = store.one(queries.TRANSACTION_NOW)[0]
        self._now = now + step
        return self.drain() if self.inline else 0

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
    dsn = dsn or config.app_settings().dsn()
    with migrations.open_checked(MaintenanceStore, dsn, application_name="pgkick-testing") as store:
        after = int(store.one(queries.JOB_ID_LAST)[0])  # no schema: SchemaError, migrate
    mode = TestQueue(dsn, tasks, inline=inline, after=after)
    previous_kicker = set_default_kicker(mode)
    previous_clock = set_moved_clock(mode.now)
    previous_check, validation.known_task = validation.known_task, tasks.check_known
    try:
        # the app's enqueue_and_kick(...) commits here; an in-process kick is never lost, so
        # no safety wake-up follows it (`wakes` lists the later jobs' own, as before)
        with config.overriding(database_url=dsn, kick_safety=timedelta(0)):
            yield mode
    finally:
        validation.known_task = previous_check
        set_moved_clock(previous_clock)
        set_default_kicker(previous_kicker)
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
