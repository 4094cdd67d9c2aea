"""Execution environments: one process each, as Lambda's are, frozen between invocations.

Why processes: what runs must be what Lambda runs, the handler in its own process
with its own connection, killable mid-job. An environment is started on demand
(a cold start), reused while warm, retired after being idle a while, killed when
an invocation outlives its timeout, and never more of them than the concurrency
cap. Between invocations it is frozen (SIGSTOP) and thawed (SIGCONT) on reuse, as
Lambda freezes its sandboxes: a background thread or a lingering connection stops
there too (`freeze=False` is the labelled kindness). `reload()` retires them all,
so the next invocation imports the app's code afresh.

What an environment says (kicks, wake-ups, results) and its death go to the
owner's callbacks; its stdout and stderr are streamed, each line prefixed with the
request id it belongs to (and the job id it names). The owner's lock guards this.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from pgkick import config
from pgkick_dev.devserver.clock import Cancellable, Clock
from pgkick_dev.devserver.timeline import Timeline

_START = re.compile(r"^START RequestId: (\S+)")
_JOB = re.compile(r"\bjob[ _]?(?:id)?\"?[:= ]\s*(\d+)|\bjob (\d+)\b")


@dataclass
class Environment:
    process: subprocess.Popen[bytes]
    stdin: IO[bytes]
    busy: Any = None  # the owner's invocation while one runs
    retired: bool = False
    frozen: bool = False
    retire_timer: Cancellable | None = None
    deadline: Cancellable | None = None


class Pool:
    def __init__(
        self,
        *,
        function: str,
        env: Mapping[str, str],
        write_log: Callable[[str], None],
        concurrency: int,
        timeout_ms: int,
        idle_seconds: float,
        lock: threading.Condition,
        clock: Clock,
        timeline: Timeline,
        on_message: Callable[[Environment, dict[str, Any]], None],
        on_exit: Callable[[Environment], None],
        freeze: bool = True,
    ) -> None:
        self.function = function
        self.env = env
        self.write_log = write_log
        self.concurrency = concurrency
        self.timeout_ms = timeout_ms
        self.idle_seconds = idle_seconds
        self.freeze = freeze
        self.cold_starts = 0
        self.timeouts = 0
        self._lock = lock
        self._clock = clock
        self._timeline = timeline
        self._on_message = on_message
        self._on_exit = on_exit
        self._envs: list[Environment] = []

    def free(self) -> Environment | None:
        """An idle environment, or a new one while under the cap; None when all are busy."""
        live = [e for e in self._envs if not e.retired]
        idle = next((e for e in live if e.busy is None), None)
        if idle is None and len(live) < self.concurrency:
            idle = self._start()
        return idle

    def invoke(self, environment: Environment, item: Any, request: dict[str, Any]) -> None:
        if environment.retire_timer:
            environment.retire_timer.cancel()
        environment.busy = item
        self._thaw(environment, getattr(item, "request_id", None))
        line = {**request, "timeout_ms": self.timeout_ms, "function": self.function}
        try:
            environment.stdin.write(json.dumps(line).encode() + b"\n")
            environment.stdin.flush()
        except OSError:  # it died between invocations; its exit hands the item back
            pass

    def arm_deadline(self, environment: Environment) -> None:
        """The invocation started (the timeout counts from here, not from a cold start): it is
        killed at its timeout exactly, as Lambda kills it, with no grace."""
        if environment.busy is not None:
            busy = environment.busy
            environment.deadline = self._clock.call_later(
                self.timeout_ms / 1000, lambda: self._time_out(environment, busy)
            )

    def finished(self, environment: Environment) -> None:
        """The invocation answered: the environment is idle (frozen), and retires if left so."""
        if environment.deadline is not None:
            environment.deadline.cancel()
        request_id = getattr(environment.busy, "request_id", None)
        environment.busy = None
        if environment.retired:  # closing or reloading: let it read the end of its input
            self._retire(environment)
            return
        if self.freeze and not environment.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(environment.process.pid, signal.SIGSTOP)
                environment.frozen = True
                self._timeline.record(
                    "freeze",
                    function=self.function,
                    request_id=request_id,
                    detail=f"pid {environment.process.pid}",
                )
        environment.retire_timer = self._clock.call_later(
            self.idle_seconds, lambda: self._retire_if_idle(environment)
        )

    def busy(self) -> list[Environment]:
        return [e for e in self._envs if e.busy is not None]

    def live(self) -> list[Environment]:
        return list(self._envs)

    def reload(self) -> int:
        """Retire every idle environment now and every busy one once it answers: the next
        invocation starts a fresh process that imports the app's code again."""
        count = 0
        for environment in list(self._envs):
            if not environment.retired:
                count += 1
                environment.retired = True  # free() skips it from now on
                if environment.busy is None:
                    self._retire(environment)
        return count

    def close(self, wait: float = 30) -> None:
        """Let every environment finish and exit (stdin closed); wait for them."""
        with self._lock:
            envs = list(self._envs)
            for environment in envs:
                self._retire(environment)
        for environment in envs:
            try:
                environment.process.wait(wait)
            except subprocess.TimeoutExpired:
                environment.process.kill()

    def _thaw(self, environment: Environment, request_id: str | None) -> None:
        if environment.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(environment.process.pid, signal.SIGCONT)
            environment.frozen = False
            self._timeline.record(
                "thaw",
                function=self.function,
                request_id=request_id,
                detail=f"pid {environment.process.pid}",
            )

    def _start(self) -> Environment:
        read_fd, write_fd = os.pipe()
        env = {
            **self.env,
            "PGKICK_SCHEMA": config.app_settings().schema,  # a CLI's --schema included
            "PGKICK_KICKER": "local",  # its kicks come back over the pipe, one hop further
            "PGKICK_LOCAL_PIPE_FD": str(write_fd),
            "PYTHONUNBUFFERED": "1",
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "pgkick_dev.local.env"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(write_fd,),
            start_new_session=True,  # a Ctrl-C in the dev server's terminal is the server's
        )
        os.close(write_fd)
        assert process.stdin is not None and process.stdout is not None
        environment = Environment(process=process, stdin=process.stdin)
        self._envs.append(environment)
        self.cold_starts += 1
        for target, args in (
            (self._read, (environment, os.fdopen(read_fd, "rb"))),
            (self._stream, (process.stdout,)),
        ):
            threading.Thread(target=target, args=args, daemon=True).start()
        return environment

    def _stream(self, output: IO[bytes]) -> None:
        """The environment's log, each line labelled with its request (and job) as it comes."""
        request = "-"
        for raw in output:
            line = raw.decode(errors="replace").rstrip("\n")
            started = _START.match(line)
            if started:
                request = started.group(1)
            job = _JOB.search(line)
            label = f"[{request[:8]}{f' job {job.group(1) or job.group(2)}' if job else ''}]"
            self.write_log(f"{self.function} {label} {line}")

    def _read(self, environment: Environment, messages: IO[bytes]) -> None:
        """Follow one environment: each message to the owner, then its exit."""
        for raw in messages:
            self._on_message(environment, json.loads(raw))
        environment.process.wait()
        with self._lock:
            self._envs.remove(environment)
            if environment.deadline is not None:
                environment.deadline.cancel()
            if environment.retire_timer is not None:
                environment.retire_timer.cancel()
            self._on_exit(environment)

    def _time_out(self, environment: Environment, item: Any) -> None:
        """Past its timeout an invocation is killed, as Lambda kills it."""
        with self._lock:
            if environment.busy is item:
                self.timeouts += 1
                with contextlib.suppress(ProcessLookupError):
                    environment.process.kill()

    def _retire_if_idle(self, environment: Environment) -> None:
        with self._lock:
            if environment.busy is None and environment in self._envs:
                self._retire(environment)

    def _retire(self, environment: Environment) -> None:
        environment.retired = True
        self._thaw(environment, None)  # a frozen process never reads the end of its input
        with contextlib.suppress(OSError):
            environment.stdin.close()
