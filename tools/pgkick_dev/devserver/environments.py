"""Execution environments: AWS's Runtime Interface Emulator running Lambda's runtime client.

Why this and not a hand-made loop: what answers must be what Lambda answers. Each
environment is one RIE process (pgkick_dev.devserver.rie finds the binary) on its own
port, whose runtime is `python -m awslambdaric <handler>`, Lambda's own runtime client,
with the function's environment (AWS_LAMBDA_FUNCTION_TIMEOUT, memory size, name). An
invocation is an HTTP POST to that RIE; the context (request id, remaining time from
the function's timeout), the marshalling of the answer (`Runtime.MarshalError`), an
unhandled error's shape (errorType, errorMessage, stackTrace), `Task timed out` and a
runtime's crash (`Runtime.ExitError`) all come from AWS's code. After a timeout or a
crash the RIE resets the runtime, as Lambda does: the next invocation is a cold init.

An environment is started on demand (a cold start), reused while warm, retired after
being idle a while, and never more of them than the concurrency cap. Between
invocations its whole process group (RIE and runtime) is frozen (SIGSTOP) and thawed
(SIGCONT) on reuse, as Lambda freezes its sandboxes: a background thread or a lingering
connection stops there too (`freeze=False` is the labelled kindness). `reload()` retires
them all, so the next invocation imports the app's code afresh.

Inside, the worker's own kicks and wake-ups go to the stack over HTTP through boto3
(pgkick_dev.devserver.runtime_env builds that environment). Each environment's log
(RIE's START/END/REPORT and the handler's lines) is streamed, each line prefixed with
the stack's request id and the job id it names. The owner's lock guards the state.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pgkick_dev.devserver import answers
from pgkick_dev.devserver.clock import Cancellable, Clock
from pgkick_dev.devserver.rie import locate
from pgkick_dev.devserver.timeline import Timeline

INVOKE_PATH = "/2015-03-31/functions/function/invocations"
_START = re.compile(r"^START RequestId: (\S+)")
_REPORT = re.compile(r"^REPORT RequestId: ")
_JOB = re.compile(r"\bjob[ _]?(?:id)?\"?[:= ]\s*(\d+)|\bjob (\d+)\b")
_ids = itertools.count(1)


@dataclass
class Environment:
    process: subprocess.Popen[bytes]
    port: int
    id: str
    busy: Any = None  # the owner's invocation while one runs
    cold: bool = True  # the next invocation initialises the runtime (first, or after a reset)
    retired: bool = False
    frozen: bool = False
    retire_timer: Cancellable | None = None
    reported: threading.Event = field(default_factory=threading.Event)
    runtime_pids: list[int] = field(default_factory=list)  # the RIE's children, last seen


class Pool:
    def __init__(
        self,
        *,
        function: str,
        handler: str,
        env: Mapping[str, str],
        runtime_env: Callable[[str], Mapping[str, str]],
        write_log: Callable[[str], None],
        concurrency: int,
        timeout_ms: int,
        memory_mb: int,
        idle_seconds: float,
        lock: threading.Condition,
        clock: Clock,
        timeline: Timeline,
        on_answer: Callable[[Environment, dict[str, Any]], None],
        on_exit: Callable[[Environment], None],
        freeze: bool = True,
    ) -> None:
        self.function = function
        self.handler = handler.replace(":", ".")  # Lambda's Handler setting: module.function
        self.env = env
        self.runtime_env = runtime_env  # the stack's endpoints for this environment's id
        self.write_log = write_log
        self.concurrency = concurrency
        self.timeout_s = max(1, math.ceil(timeout_ms / 1000))  # Lambda's Timeout: whole seconds
        self.memory_mb = memory_mb
        self.idle_seconds = idle_seconds
        self.freeze = freeze
        self.cold_starts = 0
        self.timeouts = 0
        self._lock = lock
        self._clock = clock
        self._timeline = timeline
        self._on_answer = on_answer
        self._on_exit = on_exit
        self._envs: list[Environment] = []
        self._rie: Path | None = None

    def free(self) -> Environment | None:
        """An idle environment, or a new one while under the cap; None when all are busy."""
        live = [e for e in self._envs if not e.retired]
        idle = next((e for e in live if e.busy is None), None)
        if idle is None and len(live) < self.concurrency:
            idle = self._start()
        return idle

    def invoke(self, environment: Environment, item: Any, event: Any) -> None:
        """Under the lock: thaw it and POST the event to its RIE from a thread of its own."""
        if environment.retire_timer:
            environment.retire_timer.cancel()
        environment.busy = item
        if environment.cold:
            self.cold_starts += 1
        self._thaw(environment, getattr(item, "request_id", None))
        threading.Thread(target=self._post, args=(environment, item, event), daemon=True).start()

    def finished(self, environment: Environment) -> None:
        """Under the lock: the invocation answered; idle (frozen) now, retired if left so."""
        request_id = getattr(environment.busy, "request_id", None)
        environment.busy = None
        if environment.retired:  # closing or reloading
            self._retire(environment)
            return
        if self.freeze and not environment.frozen and environment.process.poll() is None:
            self._signal(environment, signal.SIGSTOP)  # the RIE and its runtime
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

    def runtimes(self, environment: Environment) -> list[int]:
        """The pids of the processes the environment's RIE started (its Python runtime):
        what dies on Lambda when a worker is killed mid-job."""
        return _descendants(environment.process.pid)

    def busy(self) -> list[Environment]:
        return [e for e in self._envs if e.busy is not None]

    def live(self) -> list[Environment]:
        return list(self._envs)

    def find(self, environment_id: str) -> Environment | None:
        return next((e for e in self._envs if e.id == environment_id), None)

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
        """Retire every environment: idle ones now, busy ones once they answer (or `wait`)."""
        with self._lock:
            envs = list(self._envs)
            for environment in envs:
                environment.retired = True
                if environment.busy is None:
                    self._retire(environment)
        deadline = time.monotonic() + wait
        for environment in envs:
            try:
                environment.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(environment, signal.SIGKILL)
                environment.process.wait()

    # -- one environment ----------------------------------------------------------------
    def _start(self) -> Environment:
        if self._rie is None:
            self._rie = locate(say=self.write_log)
        port, environment_id = free_port(), f"{self.function}-{next(_ids)}"
        env = {
            **self.env,
            **self.runtime_env(environment_id),
            "AWS_LAMBDA_FUNCTION_NAME": self.function,
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(self.timeout_s),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.function}",  # as Lambda sets them
            "AWS_LAMBDA_LOG_STREAM_NAME": f"{time.strftime('%Y/%m/%d')}/[$LATEST]{environment_id}",
            "LAMBDA_TASK_ROOT": os.getcwd(),
            "PYTHONUNBUFFERED": "1",
        }
        for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE"):
            env.pop(name, None)  # the dummy credentials alone: nothing of the developer's
        process = subprocess.Popen(
            [
                str(self._rie),
                "--log-level",
                "error",
                "--runtime-interface-emulator-address",
                f"127.0.0.1:{port}",
                "--runtime-api-address",
                f"127.0.0.1:{free_port()}",
                sys.executable,
                "-m",
                "awslambdaric",
                self.handler,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: frozen whole; Ctrl-C is the server's
        )
        assert process.stdout is not None
        environment = Environment(process=process, port=port, id=environment_id)
        self._envs.append(environment)
        stream = threading.Thread(target=self._stream, args=(environment, process.stdout))
        stream.daemon = True
        stream.start()
        return environment

    def _post(self, environment: Environment, item: Any, event: bytes) -> None:
        """One invocation through the RIE; its answer (or the environment's death) to the owner."""
        started = time.monotonic()
        environment.reported.clear()
        url = f"http://127.0.0.1:{environment.port}{INVOKE_PATH}"
        deadline = started + 10  # a cold RIE listens within milliseconds
        while True:
            try:
                request = urllib.request.Request(url, data=event, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout_s + 30) as answer:
                    status, body = answer.status, answer.read()
                break
            except urllib.error.HTTPError as exc:  # 502: the runtime exited (Runtime.ExitError)
                status, body = exc.code, exc.read()
                break
            except (ConnectionRefusedError, urllib.error.URLError) as exc:
                refused = isinstance(getattr(exc, "reason", exc), ConnectionRefusedError)
                if refused and time.monotonic() < deadline and environment.process.poll() is None:
                    time.sleep(0.01)
                    continue
                self._signal(environment, signal.SIGKILL)  # its exit hands the item back
                return
            except OSError:
                self._signal(environment, signal.SIGKILL)
                return
        elapsed = round((time.monotonic() - started) * 1000, 2)
        answer_ = answers.read(status, body)
        if not answer_["crashed"]:
            environment.reported.wait(2)  # the REPORT line follows the answer (none on a crash)
        answer_.update(duration_ms=elapsed, peak_rss_mb=_peak_rss_mb(environment.process.pid))
        environment.runtime_pids = _descendants(environment.process.pid)
        with self._lock:
            environment.cold = bool(answer_["reset"])  # a timeout or a crash: init again
            if answer_["timed_out"]:
                self.timeouts += 1
            if environment.busy is item:
                self._on_answer(environment, answer_)

    def _stream(self, environment: Environment, output: IO[bytes]) -> None:
        """The environment's log, each line labelled with the stack's request id (and job)."""
        request = "-"
        for raw in output:
            line = raw.decode(errors="replace").rstrip("\n")
            if _START.match(line):
                request = str(getattr(environment.busy, "request_id", None) or "-")
            job = _JOB.search(line)
            label = f"[{request[:8]}{f' job {job.group(1) or job.group(2)}' if job else ''}]"
            self.write_log(f"{self.function} {label} {line}")
            if _REPORT.match(line):
                environment.reported.set()
        environment.process.wait()
        for pid in environment.runtime_pids:  # orphaned when the RIE itself was killed
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with self._lock:
            if environment in self._envs:
                self._envs.remove(environment)
            if environment.retire_timer is not None:
                environment.retire_timer.cancel()
            self._on_exit(environment)

    def _thaw(self, environment: Environment, request_id: str | None) -> None:
        if environment.frozen:
            self._signal(environment, signal.SIGCONT)
            environment.frozen = False
            self._timeline.record(
                "thaw",
                function=self.function,
                request_id=request_id,
                detail=f"pid {environment.process.pid}",
            )

    def _signal(self, environment: Environment, signum: int) -> None:
        """To the RIE's process group and to every process under it: the RIE starts its
        runtime in a process group of its own."""
        pids = [environment.process.pid, *_descendants(environment.process.pid)]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(environment.process.pid, signum)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def _retire_if_idle(self, environment: Environment) -> None:
        with self._lock:
            if environment.busy is None and environment in self._envs:
                self._retire(environment)

    def _retire(self, environment: Environment) -> None:
        """Stop it: thawed first (a stopped process acts on no signal but KILL), then TERM."""
        environment.retired = True
        self._thaw(environment, None)
        self._signal(environment, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    """Every process under `pid` (children of any of its threads, recursively)."""
    found: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        tasks = Path(f"/proc/{pid}/task").glob("*/children")
        for child in sorted({int(c) for task in tasks for c in task.read_text().split()}):
            found += [child, *_descendants(child)]
    return found


def _peak_rss_mb(rie_pid: int) -> int:
    """The runtime's peak RSS (Lambda's "Max Memory Used"; the RIE's own REPORT line says
    the memory size instead): VmHWM of the processes under the RIE."""
    peak = 0
    with contextlib.suppress(OSError, ValueError):
        for child in _descendants(rie_pid):
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
    return round(peak / 1024)
