"""LocalKicker: the local stack (pgkick_dev.devserver) in this process, behind the Kicker protocol.

Why it exists beside `pgkick dev`: the demo, the bench and the tests drive the
stack from inside their own process (its stats, `wait_idle`). It is the same
stand-in as the dev server's, not a second one: one function's asynchronous queue
(pgkick_dev.devserver.queue: kept, retried, aged, throttled with Lambda's backoff,
loops cut after 16 hops), its environments (pgkick_dev.devserver.environments:
AWS's emulator running Lambda's runtime client, frozen between invocations), and
its scheduler (pgkick_dev.devserver.scheduler: wake-ups and rescues booked as
one-time schedules named as LambdaKicker names them, fired within the minute).
The stack's Lambda and Scheduler APIs are served on a free local port (`url`):
the workers in the environments kick and book wake-ups there, through boto3.

Each kindness is an explicit, named argument: `fast_scheduler` (at the second),
`freeze=False`, `instant_throttle`. Time compression for tests (`retry_delays`,
`throttle_backoff`) is not a kindness: the same steps, shorter.

It also fires the `@pgkick.periodic` declarations it is given with timers, each tick
delivered twice by default, as the scheduler may (pgkick_dev.local.ticks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgkick.kick.kickers import kick_event
from pgkick.tasks.recurring import Periodic
from pgkick_dev.devserver.clock import Clock
from pgkick_dev.devserver.invocations import (
    LOOP_LIMIT,
    RETRY_DELAYS,
    THROTTLE_BACKOFF,
    QueueOptions,
    QueueStats,
)
from pgkick_dev.devserver.server import ServerThread, make_app
from pgkick_dev.devserver.stack import FunctionSpec, Stack
from pgkick_dev.devserver.timeline import Timeline
from pgkick_dev.local.ticks import PeriodicTimers, StartTimer, thread_timer

__all__ = ["LOOP_LIMIT", "LocalKicker", "LocalStats"]

FUNCTION = "pgkick-worker-local"
MAX_EVENT_AGE = 3600.0  # pgkick's template: KickMaxEventAgeSeconds
LocalStats = QueueStats


class _Log:
    """Where the environments' lines go: a file (appended), or this process's stderr."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def __call__(self, line: str) -> None:
        if self.path is None:
            import sys

            print(line, file=sys.stderr, flush=True)
        else:
            with self.path.open("a") as out:
                out.write(line + "\n")


class LocalKicker:
    runs_jobs_nearby = True  # `pgkick enqueue` waits for the job (pgkick.cli.main)

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        concurrency: int = 4,
        timeout_ms: int = 60_000,
        idle_seconds: float = 5.0,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
        max_retries: int = 2,
        max_event_age: float = MAX_EVENT_AGE,
        allow_loops: bool = False,
        output: Path | None = None,
        periodic: Iterable[Periodic] = (),
        tick_deliveries: int = 2,
        tick_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        tick_timer: StartTimer = thread_timer,
        clock: Clock | None = None,
        timeline: Timeline | None = None,
        freeze: bool = True,
        fast_scheduler: bool = False,
        instant_throttle: bool = False,
        throttle_backoff: tuple[float, float] = THROTTLE_BACKOFF,
        duplicate_rate: float = 0.0,
        drop_rate: float = 0.0,
        seed: int | None = None,
        handler: str = "pgkick.aws.worker:handler",
    ) -> None:
        """output: a file for the workers' logs (default: this process's stderr).
        allow_loops: as `RecursiveLoop: Allow` on the function (the default terminates).
        periodic: declarations whose ticks to fire, each delivered `tick_deliveries` times
        (tick_clock and tick_timer: for tests, a clock and timers they move by hand)."""
        if concurrency < 1:
            raise ValueError(f"concurrency: {concurrency} must be at least 1")
        self._log = _Log(output)
        options = QueueOptions(
            retry_delays=retry_delays,
            max_retries=max_retries,
            max_event_age=max_event_age,
            allow_loops=allow_loops,
            throttle_backoff=throttle_backoff,
            instant_throttle=instant_throttle,
            duplicate_rate=duplicate_rate,
            drop_rate=drop_rate,
            seed=seed,
        )
        spec = FunctionSpec(
            FUNCTION,
            handler=handler,
            timeout_ms=timeout_ms,
            concurrency=concurrency,
            idle_seconds=idle_seconds,
            options=options,
        )
        self.stack = Stack(
            [spec],
            env=env,
            clock=clock,
            timeline=timeline,
            write_log=self._log,
            freeze=freeze,
            fast_scheduler=fast_scheduler,
            seed=seed,
        )
        self._server = ServerThread(make_app(self.stack, with_dashboard=False)).__enter__()
        self.stack.endpoint = self._server.url
        self._queue = self.stack.functions[FUNCTION]
        self._ticks = PeriodicTimers(
            periodic,
            self._fire_tick,
            now=tick_clock,
            start_timer=tick_timer,
            deliveries=tick_deliveries,
        )
        self._closed = False

    @property
    def stats(self) -> QueueStats:
        return self._queue.stats

    @property
    def url(self) -> str:
        """Where this stack's Lambda and Scheduler APIs listen (boto3's endpoint URL)."""
        return self._server.url

    @property
    def timeline(self) -> Timeline:
        return self.stack.timeline

    @property
    def output(self) -> Path | None:
        """Where the environments' stdout and stderr go (None: this process's stderr)."""
        return self._log.path

    @output.setter
    def output(self, path: Path | None) -> None:
        self._log.path = path

    # -- the Kicker protocol ------------------------------------------------------
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        """An asynchronous invoke from outside any invocation: a new chain."""
        self._queue.submit(kick_event(queue, reason, hop), lineage=0)

    def wake_at(self, queue: str, when: datetime) -> None:
        with self.stack.lock:
            if not self._closed:
                self.stack.book(FUNCTION, queue, when, "wake", None)

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        with self.stack.lock:
            if not self._closed:
                self.stack.book(FUNCTION, queue, when, "rescue", name)

    def cancel_rescue(self, name: str) -> None:
        with self.stack.lock:
            self.stack.cancel(name)
            self.stack.lock.notify_all()

    def ticks(self) -> dict[str, datetime]:
        """Each periodic declaration's next tick, as its timer sleeps until it."""
        return self._ticks.due()

    def rescues(self) -> list[str]:
        """The names of the rescues booked and neither fired nor cancelled."""
        return sorted(
            s.name
            for s in self.stack.scheduler.list()
            if '"rescue"' in str(s.body["Target"].get("Input"))
        )

    # -- for the demo, the bench and the tests ------------------------------------
    def wait_idle(self, timeout: float, *, include_wakes: bool = False) -> bool:
        """Block until nothing runs or waits (and, if asked, no wake-up or rescue is booked;
        the periodic timers never count: they are armed for as long as the kicker lives)."""
        return self.stack.wait_idle(timeout, include_schedules=include_wakes)

    def processes(self) -> list[int]:
        """The pids of the runtimes (awslambdaric's Python) running an invocation now."""
        with self.stack.lock:
            pool = self._queue.pool
            return [pid for e in pool.busy() for pid in pool.runtimes(e)]

    def close(self) -> None:
        """Cancel ticks, wake-ups and retries, and let every environment exit."""
        self._ticks.close()
        with self.stack.lock:
            self._closed = True
        self.stack.close()
        self._server.__exit__()

    def _fire_tick(self, event: dict[str, Any]) -> None:
        """A schedule's invocation, as the scheduler sends it: a new chain."""
        self._queue.submit(event, lineage=0)
