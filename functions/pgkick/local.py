"""The local kicker: Lambda's asynchronous invoke, stood in for development, the demo and tests.

Why it must be faithful, not kind: a stand-in nicer than Lambda lets our tests
pass where a user's deploy fails. So, as Lambda's asynchronous queue does:
- every event is kept and run once (never merged with another: whatever
  merging pgkick needs is pgkick's own, see pgkick.watch);
- an event that finds every execution environment busy waits (a throttle,
  counted), and is dropped once older than its maximum age;
- an invocation that errors, crashes or times out is retried twice, after
  Lambda's delays (about 1 and 2 minutes, scaled down by tests);
- a chain of invocations that kick each other is cut after 16 (recursive loop
  detection): the 17th event is dropped to `failed_kicks`, unless the function
  is configured to allow loops (`RecursiveLoop: Allow`). The chain is followed
  as AWS follows it, by where an event came from, not by what it says: a kick
  sent from inside an invocation is one hop further than that invocation; a
  kick from the app or a wake-up timer starts a new chain.

Execution environments are processes (the worker handler in its own process
with its own connection, killable mid-job): started on demand (a cold start),
reused while warm, retired after being idle a few seconds, never more than the
concurrency cap. A worker's own kicks and wake-ups come back over a pipe, so
the cap, the queue and the timers live in one place.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pgkick.kick import kick_event

log = logging.getLogger("pgkick.local")

RETRY_DELAYS = (60.0, 120.0)  # Lambda retries a failed asynchronous invocation twice
MAX_EVENT_AGE = 6 * 3600.0  # Lambda's default maximum event age, seconds
LOOP_LIMIT = 16  # invocations of one chain before Lambda stops the next one


@dataclass
class _Event:
    event: dict[str, Any]
    lineage: int  # invocations of this chain before this one (AWS's count, not the payload's)
    born: float  # monotonic seconds: the maximum age counts from here
    tries: int = 0
    throttled: bool = False


@dataclass
class _Environment:
    process: subprocess.Popen[bytes]
    stdin: IO[bytes]
    busy: _Event | None = None
    retired: bool = False
    retire_timer: threading.Timer | None = None
    deadline: threading.Timer | None = None


@dataclass
class LocalStats:
    events: int = 0  # accepted by the async queue (kicks, wake-ups, retries not counted)
    invocations: int = 0
    cold_starts: int = 0
    throttles: int = 0  # events that had to wait for a free environment
    retries: int = 0
    crashes: int = 0
    errors: int = 0
    timeouts: int = 0
    db_sessions: int = 0  # database connections the invocations opened
    failed_kicks: list[dict[str, Any]] = field(default_factory=list)  # dropped, with why
    results: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_mb: int = 0  # the largest "Max Memory Used" of any environment so far

    @property
    def dropped(self) -> int:
        return len(self.failed_kicks)


class LocalKicker:
    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        concurrency: int = 4,
        timeout_ms: int = 60_000,
        idle_seconds: float = 5.0,
        retry_delays: tuple[float, float] = RETRY_DELAYS,
        max_event_age: float = MAX_EVENT_AGE,
        allow_loops: bool = False,
        output: Path | None = None,
    ) -> None:
        """output: a file for the workers' logs and metrics (default: this process's stdout).
        allow_loops: as `RecursiveLoop: Allow` on the function (the default terminates)."""
        if concurrency < 1:
            raise ValueError(f"concurrency: {concurrency} must be at least 1")
        self.env = {**os.environ, **(env or {})}
        self.output = output
        self.concurrency = concurrency
        self.timeout_ms = timeout_ms
        self.idle_seconds = idle_seconds
        self.retry_delays = retry_delays
        self.max_event_age = max_event_age
        self.allow_loops = allow_loops
        self.stats = LocalStats()
        self._lock = threading.Condition()
        self._pending: list[_Event] = []
        self._delayed: set[threading.Timer] = set()  # retries waiting for their delay
        self._envs: list[_Environment] = []
        self._timers: dict[tuple[str, int], threading.Timer] = {}
        self._closed = False

    # -- the Kicker protocol ------------------------------------------------------
    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        """An asynchronous invoke from outside any invocation: a new chain."""
        self._accept(_Event(kick_event(queue, reason, hop), lineage=0, born=time.monotonic()))

    def wake_at(self, queue: str, when: datetime) -> None:
        due = int(when.timestamp()) + 1  # whole seconds, never early
        with self._lock:
            if self._closed or (queue, due) in self._timers:
                return
            delay = max(0.0, due - datetime.now(UTC).timestamp())
            timer = threading.Timer(delay, self._fire_wake, (queue, due))
            timer.daemon = True
            self._timers[(queue, due)] = timer
        timer.start()

    # -- for the demo, the bench and the tests ------------------------------------
    def wait_idle(self, timeout: float, *, include_wakes: bool = False) -> bool:
        """Block until nothing runs or waits (and, if asked, no wake-up is booked)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: (
                    not self._pending
                    and not self._delayed
                    and not any(e.busy for e in self._envs)
                    and (not include_wakes or not self._timers)
                ),
                timeout,
            )

    def processes(self) -> list[int]:
        with self._lock:
            return [e.process.pid for e in self._envs if e.busy]

    def close(self) -> None:
        """Cancel wake-ups and retries, and let every environment exit (stdin closed)."""
        with self._lock:
            self._closed = True
            for timer in [*self._timers.values(), *self._delayed]:
                timer.cancel()
            self._timers.clear()
            self._delayed.clear()
            envs = list(self._envs)
        for environment in envs:
            self._retire(environment)
            environment.process.wait(30)

    # -- the asynchronous queue ---------------------------------------------------
    def _accept(self, item: _Event) -> None:
        with self._lock:
            if self._closed:
                return
            if item.lineage >= LOOP_LIMIT and not self.allow_loops:
                self._drop(item, "recursive loop detected")
                return
            self.stats.events += 1
            self._pending.append(item)
            self._dispatch()

    def _dispatch(self) -> None:
        """Hand waiting events to idle environments, starting new ones up to the cap."""
        now = time.monotonic()
        for item in [i for i in self._pending if now - i.born > self.max_event_age]:
            self._pending.remove(item)
            self._drop(item, "maximum event age exceeded")
        while self._pending:
            live = [e for e in self._envs if not e.retired]
            idle = next((e for e in live if e.busy is None), None)
            if idle is None:
                if len(live) >= self.concurrency:
                    for item in self._pending:
                        if not item.throttled:
                            item.throttled = True
                            self.stats.throttles += 1
                    return
                idle = self._start()
            item = self._pending.pop(0)
            if idle.retire_timer:
                idle.retire_timer.cancel()
            idle.busy = item
            self.stats.invocations += 1
            line = {"event": item.event, "timeout_ms": self.timeout_ms}
            try:
                idle.stdin.write(json.dumps(line).encode() + b"\n")
                idle.stdin.flush()
            except OSError:  # it died between invocations; the reader retries the item
                pass

    def _drop(self, item: _Event, why: str) -> None:
        """Lambda sends such an event to the on-failure destination; we keep it in a list."""
        log.warning("local kick %s dropped: %s", item.event, why)
        self.stats.failed_kicks.append({"event": item.event, "why": why, "tries": item.tries})
        self._lock.notify_all()

    def _retry(self, item: _Event, why: str) -> None:
        """A failed invocation runs again after Lambda's delay, at most twice."""
        log.warning("local invocation %s %s", item.event, why)
        if self._closed:
            return
        if item.tries >= len(self.retry_delays):
            self._drop(item, f"retries exhausted ({why})")
            return
        self.stats.retries += 1
        again = _Event(item.event, item.lineage, item.born, item.tries + 1)
        timer = threading.Timer(self.retry_delays[item.tries], lambda: self._requeue(again, timer))
        timer.daemon = True
        self._delayed.add(timer)
        timer.start()

    def _requeue(self, item: _Event, timer: threading.Timer) -> None:
        with self._lock:
            self._delayed.discard(timer)
            if not self._closed:
                self._pending.append(item)
                self._dispatch()
            self._lock.notify_all()

    def _fire_wake(self, queue: str, due: int) -> None:
        with self._lock:  # one step, so wait_idle never sees the wake gone but not yet kicked
            self._timers.pop((queue, due), None)
            self.kick(queue, "wake")

    # -- execution environments -----------------------------------------------------
    def _start(self) -> _Environment:
        read_fd, write_fd = os.pipe()
        env = {**self.env, "PGKICK_KICKER": "local", "PGKICK_LOCAL_PIPE_FD": str(write_fd)}
        with contextlib.ExitStack() as files:
            out = files.enter_context(self.output.open("ab")) if self.output else None
            process = subprocess.Popen(
                [sys.executable, "-m", "pgkick.local_env"],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=out,
                env=env,
                pass_fds=(write_fd,),
            )
        os.close(write_fd)
        assert process.stdin is not None
        environment = _Environment(process=process, stdin=process.stdin)
        self._envs.append(environment)
        self.stats.cold_starts += 1
        reader = threading.Thread(
            target=self._read, args=(environment, os.fdopen(read_fd, "rb")), daemon=True
        )
        reader.start()
        return environment

    def _read(self, environment: _Environment, messages: IO[bytes]) -> None:
        """Follow one environment: its kicks, wake-ups and results, then its exit."""
        for raw in messages:
            message = json.loads(raw)
            if "kick" in message:
                with self._lock:
                    sender = environment.busy
                    lineage = sender.lineage + 1 if sender else 0
                    self._accept(_Event(message["kick"], lineage, time.monotonic()))
            elif "wake" in message:
                self.wake_at(
                    message["wake"]["queue"], datetime.fromisoformat(message["wake"]["at"])
                )
            elif "started" in message:  # the timeout counts from here, not from a cold start
                self._arm_deadline(environment)
            elif "result" in message:
                self._finish(environment, message)
        environment.process.wait()
        with self._lock:
            self._envs.remove(environment)
            if environment.deadline is not None:
                environment.deadline.cancel()
            if environment.busy is not None:  # died mid-invocation (killed, or timed out)
                self.stats.crashes += 1
                self._retry(environment.busy, f"died (exit {environment.process.returncode})")
            self._dispatch()
            self._lock.notify_all()

    def _arm_deadline(self, environment: _Environment) -> None:
        with self._lock:
            if environment.busy is not None:
                environment.deadline = threading.Timer(
                    self.timeout_ms / 1000 + 1.0, self._time_out, (environment, environment.busy)
                )
                environment.deadline.daemon = True
                environment.deadline.start()

    def _finish(self, environment: _Environment, message: dict[str, Any]) -> None:
        with self._lock:
            result = message["result"]
            self.stats.results.append(result)
            self.stats.db_sessions += int(message.get("db_sessions", 0))
            self.stats.peak_rss_mb = max(self.stats.peak_rss_mb, int(message.get("peak_rss_mb", 0)))
            if environment.deadline is not None:
                environment.deadline.cancel()
            if isinstance(result, dict) and "error" in result and environment.busy:
                self.stats.errors += 1  # the handler raised: Lambda retries that too
                self._retry(environment.busy, f"failed: {result['error']}")
            environment.busy = None
            self._schedule_retire(environment)
            self._dispatch()
            self._lock.notify_all()

    def _time_out(self, environment: _Environment, item: _Event) -> None:
        """Past its timeout an invocation is killed, as Lambda kills it."""
        with self._lock:
            if environment.busy is item:
                self.stats.timeouts += 1
                with contextlib.suppress(ProcessLookupError):
                    environment.process.kill()

    def _schedule_retire(self, environment: _Environment) -> None:
        timer = threading.Timer(self.idle_seconds, self._retire_if_idle, (environment,))
        timer.daemon = True
        environment.retire_timer = timer
        timer.start()

    def _retire_if_idle(self, environment: _Environment) -> None:
        with self._lock:
            if environment.busy is None and environment in self._envs:
                self._retire(environment)

    def _retire(self, environment: _Environment) -> None:
        """Close its stdin: the environment finishes what it runs, then exits."""
        environment.retired = True
        with contextlib.suppress(OSError):
            environment.stdin.close()


class PipeKicker:
    """Inside a local environment: hand kicks and wake-ups back to the parent LocalKicker."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", buffering=1)
        self._lock = threading.Lock()

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.send({"kick": kick_event(queue, reason, hop)})

    def wake_at(self, queue: str, when: datetime) -> None:
        self.send({"wake": {"queue": queue, "at": when.isoformat()}})

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(message, default=str) + "\n")
