"""The local kicker's execution environments: one process each, as Lambda's are.

Why processes: what runs must be what Lambda runs, the worker handler in its
own process with its own connection, killable mid-job. An environment is
started on demand (a cold start), reused while warm, retired after being idle
a few seconds, killed when an invocation outlives its timeout, and never more
of them than the concurrency cap. What an environment says (its kicks,
wake-ups, results) and its death are handed to the owner's callbacks; the
owner's lock guards everything here.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pgkick import config


@dataclass
class Environment:
    process: subprocess.Popen[bytes]
    stdin: IO[bytes]
    busy: Any = None  # the owner's event while an invocation runs
    retired: bool = False
    retire_timer: threading.Timer | None = None
    deadline: threading.Timer | None = None


class Pool:
    def __init__(
        self,
        *,
        env: Mapping[str, str],
        output: Path | None,
        concurrency: int,
        timeout_ms: int,
        idle_seconds: float,
        lock: threading.Condition,
        on_message: Callable[[Environment, dict[str, Any]], None],
        on_exit: Callable[[Environment], None],
    ) -> None:
        self.env = env
        self.output = output
        self.concurrency = concurrency
        self.timeout_ms = timeout_ms
        self.idle_seconds = idle_seconds
        self.cold_starts = 0
        self.timeouts = 0
        self._lock = lock
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

    def invoke(self, environment: Environment, item: Any, event: dict[str, Any]) -> None:
        if environment.retire_timer:
            environment.retire_timer.cancel()
        environment.busy = item
        line = {"event": event, "timeout_ms": self.timeout_ms}
        try:
            environment.stdin.write(json.dumps(line).encode() + b"\n")
            environment.stdin.flush()
        except OSError:  # it died between invocations; its exit hands the item back
            pass

    def arm_deadline(self, environment: Environment) -> None:
        """The invocation started (the timeout counts from here, not from a cold start): it is
        killed at its timeout exactly, as Lambda kills it, with no grace."""
        if environment.busy is not None:
            environment.deadline = threading.Timer(
                self.timeout_ms / 1000, self._time_out, (environment, environment.busy)
            )
            environment.deadline.daemon = True
            environment.deadline.start()

    def finished(self, environment: Environment) -> None:
        """The invocation answered: the environment is idle, and retires if left so."""
        if environment.deadline is not None:
            environment.deadline.cancel()
        environment.busy = None
        timer = threading.Timer(self.idle_seconds, self._retire_if_idle, (environment,))
        timer.daemon = True
        environment.retire_timer = timer
        timer.start()

    def busy(self) -> list[Environment]:
        return [e for e in self._envs if e.busy is not None]

    def close(self) -> None:
        """Let every environment finish and exit (stdin closed); wait for them."""
        with self._lock:
            envs = list(self._envs)
        for environment in envs:
            self._retire(environment)
            environment.process.wait(30)

    def _start(self) -> Environment:
        read_fd, write_fd = os.pipe()
        env = {
            **self.env,
            "PGKICK_SCHEMA": config.app_settings().schema,  # the CLI's --schema included
            "PGKICK_KICKER": "local",
            "PGKICK_LOCAL_PIPE_FD": str(write_fd),
        }
        with contextlib.ExitStack() as files:
            out = files.enter_context(self.output.open("ab")) if self.output else None
            process = subprocess.Popen(
                [sys.executable, "-m", "pgkick_dev.local.env"],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=out,
                env=env,
                pass_fds=(write_fd,),
            )
        os.close(write_fd)
        assert process.stdin is not None
        environment = Environment(process=process, stdin=process.stdin)
        self._envs.append(environment)
        self.cold_starts += 1
        reader = threading.Thread(
            target=self._read, args=(environment, os.fdopen(read_fd, "rb")), daemon=True
        )
        reader.start()
        return environment

    def _read(self, environment: Environment, messages: IO[bytes]) -> None:
        """Follow one environment: each message to the owner, then its exit."""
        for raw in messages:
            self._on_message(environment, json.loads(raw))
        environment.process.wait()
        with self._lock:
            self._envs.remove(environment)
            if environment.deadline is not None:
                environment.deadline.cancel()
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
        with contextlib.suppress(OSError):
            environment.stdin.close()
