"""The local kicker: Lambda's stand-in for development, the demo and the tests.

Why processes and not threads: what runs must be what Lambda runs, the worker
handler in its own process with its own connection, killable mid-job. Like
Lambda, a process is an *execution environment*: started on demand (a cold
start), reused for the next invocation while warm, retired after being idle a
few seconds, never more of them than the concurrency cap. Kicks beyond the cap
wait in a queue (Lambda's async queue does the same) and are coalesced per
queue; a kick is a hint, so one pending kick per queue is enough.

A worker's own kicks (re-kick, fan-out) and wake-ups come back to this parent
over a pipe, so the cap and the timers live in one place. Wake-ups are timers:
they fire at the job's run_at and cost nothing before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pgkick.kick import kick_event

log = logging.getLogger("pgkick.local")

RETRIES = 2  # Lambda retries a failed asynchronous invocation twice


@dataclass
class _Environment:
    process: subprocess.Popen[bytes]
    stdin: IO[bytes]
    busy: dict[str, Any] | None = None
    retired: bool = False
    retire_timer: threading.Timer | None = None
    deadline: threading.Timer | None = None


@dataclass
class LocalStats:
    cold_starts: int = 0
    invocations: int = 0
    crashes: int = 0
    errors: int = 0
    timeouts: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_mb: int = 0  # the largest "Max Memory Used" of any environment so far


class LocalKicker:
    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        concurrency: int = 4,
        timeout_ms: int = 60_000,
        idle_seconds: float = 5.0,
        output: Path | None = None,
    ) -> None:
        """output: a file for the workers' logs and metrics (default: this process's stdout)."""
        self.env = {**os.environ, **(env or {})}
        self.output = output
        self.concurrency = concurrency
        self.timeout_ms = timeout_ms
        self.idle_seconds = idle_seconds
        self.stats = LocalStats()
        self._lock = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._envs: list[_Environment] = []
        self._timers: dict[tuple[str, int], threading.Timer] = {}
        self._closed = False

    # -- the Kicker protocol ------------------------------------------------------
    def kick(self, queue: str, reason: str) -> None:
        self._submit({"event": kick_event(queue, reason), "tries": 0})

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

    # -- for the demo and the tests ---------------------------------------------
    def wait_idle(self, timeout: float, *, include_wakes: bool = False) -> bool:
        """Block until nothing runs or waits (and, if asked, no wake-up is booked)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: (
                    not self._pending
                    and not any(e.busy for e in self._envs)
                    and (not include_wakes or not self._timers)
                ),
                timeout,
            )

    def processes(self) -> list[int]:
        with self._lock:
            return [e.process.pid for e in self._envs if e.busy]

    def close(self) -> None:
        """Cancel wake-ups and let every environment exit (stdin closed)."""
        with self._lock:
            self._closed = True
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
            envs = list(self._envs)
        for environment in envs:
            self._retire(environment)
            environment.process.wait(30)

    # -- dispatch ---------------------------------------------------------------
    def _submit(self, item: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            queue = item["event"]["queue"]
            if not any(p["event"]["queue"] == queue for p in self._pending):
                self._pending.append(item)
            self._dispatch()

    def _dispatch(self) -> None:
        """Hand pending events to idle environments, starting new ones up to the cap."""
        while self._pending:
            live = [e for e in self._envs if not e.retired]
            idle = next((e for e in live if e.busy is None), None)
            if idle is None:
                if len(live) >= self.concurrency:
                    return
                idle = self._start()
            item = self._pending.pop(0)
            if idle.retire_timer:
                idle.retire_timer.cancel()
            idle.busy = item
            self.stats.invocations += 1
            line = {"event": item["event"], "timeout_ms": self.timeout_ms}
            try:
                idle.stdin.write(json.dumps(line).encode() + b"\n")
                idle.stdin.flush()
            except OSError:  # it died between invocations; the reader puts the item back
                pass

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
                self.kick(message["kick"]["queue"], message["kick"]["reason"])
            elif "wake" in message:
                self.wake_at(
                    message["wake"]["queue"], datetime.fromisoformat(message["wake"]["at"])
                )
            elif "started" in message:  # the timeout counts from here, not from a cold start
                with self._lock:
                    if environment.busy is not None:
                        environment.deadline = threading.Timer(
                            self.timeout_ms / 1000 + 1.0,
                            self._time_out,
                            (environment, environment.busy),
                        )
                        environment.deadline.daemon = True
                        environment.deadline.start()
            elif "result" in message:
                with self._lock:
                    result = message["result"]
                    self.stats.results.append(result)
                    self.stats.peak_rss_mb = max(
                        self.stats.peak_rss_mb, int(message.get("peak_rss_mb", 0))
                    )
                    if environment.deadline is not None:
                        environment.deadline.cancel()
                    if isinstance(result, dict) and "error" in result and environment.busy:
                        self.stats.errors += 1  # the handler raised: Lambda retries that too
                        self._retry(environment.busy, f"failed: {result['error']}")
                    environment.busy = None
                    self._schedule_retire(environment)
                    self._dispatch()
                    self._lock.notify_all()
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

    def _retry(self, item: dict[str, Any], why: str) -> None:
        """Queue a failed invocation again, at most RETRIES times, as Lambda does."""
        log.warning("local invocation %s %s", item["event"], why)
        if item["tries"] < RETRIES and not self._closed:
            self._pending.append({**item, "tries": item["tries"] + 1})

    def _time_out(self, environment: _Environment, item: dict[str, Any]) -> None:
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

    def _fire_wake(self, queue: str, due: int) -> None:
        with self._lock:  # one step, so wait_idle never sees the wake gone but not yet kicked
            self._timers.pop((queue, due), None)
            self.kick(queue, "wake")


class PipeKicker:
    """Inside a local environment: hand kicks and wake-ups back to the parent LocalKicker."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", buffering=1)
        self._lock = threading.Lock()

    def kick(self, queue: str, reason: str) -> None:
        self.send({"kick": kick_event(queue, reason)})

    def wake_at(self, queue: str, when: datetime) -> None:
        self.send({"wake": {"queue": queue, "at": when.isoformat()}})

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(message, default=str) + "\n")
