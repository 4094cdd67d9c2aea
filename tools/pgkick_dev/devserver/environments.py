"""Execution environments: AWS's Runtime Interface Emulator running Lambda's runtime client.

Why this and not a hand-made loop: what answers must be what Lambda answers. Each
environment is one RIE process (pgkick_dev.devserver.rie finds the binary) on its own
port, whose runtime is awslambdaric's main (`python -m pgkick_dev.devserver.lifeline
<handler>`: it dies with the RIE), Lambda's own runtime client,
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

Memory is enforced as Lambda enforces MemorySize: while an invocation runs, the runtime's
peak RSS (VmHWM, what Lambda reports as "Max Memory Used") is read every 50 ms and once
more when it answers; past the function's memory size the environment is killed
(SIGKILL) and discarded, and the invocation fails with `Runtime.ExitError` ("signal:
killed"): an asynchronous event is retried. Not RLIMIT_AS: that limits virtual memory,
which threads' stacks and mapped libraries inflate far beyond what Lambda counts.

Inside, the worker's own kicks go to the stack's Invoke API as signed HTTP requests
(pgkick.awsapi.lambda_invoke.InvokeClient, as inside AWS's Lambda), its wake-ups to the
Scheduler API the same way (the stack's `runtime_env` builds that environment). Each
environment's log (RIE's START/END/REPORT and the handler's lines) is streamed, each line
prefixed with the stack's request id and the job id it names. The owner's lock guards the state.
This module is the pool's bookkeeping; what is done to an environment's processes
(started, posted to, signalled, measured) is pgkick_dev.devserver.rie_process.
"""

from __future__ import annotations

import itertools
import math
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from pgkick_dev.devserver import answers
from pgkick_dev.devserver.clock import Clock
from pgkick_dev.devserver.ports import free_port
from pgkick_dev.devserver.rie import locate
from pgkick_dev.devserver.rie_process import (
    REPORT,
    START,
    Environment,
    descendants,
    function_env,
    kill_orphans,
    label,
    launch,
    log_text,
    peak_rss_mb,
    post,
    signal_all,
)
from pgkick_dev.devserver.timeline import Timeline

__all__ = ["Environment", "Pool"]

_ids = itertools.count(1)


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
        environment.log.clear()  # this invocation's lines from here (the last one's REPORT came)
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
            signal_all(environment, signal.SIGSTOP)  # the RIE and its runtime
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
        return descendants(environment.process.pid)

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
                signal_all(environment, signal.SIGKILL)
                environment.process.wait()

    # -- one environment ----------------------------------------------------------------
    def _start(self) -> Environment:
        if self._rie is None:
            self._rie = locate(say=self.write_log)
        port, environment_id = free_port(), f"{self.function}-{next(_ids)}"
        env = function_env(
            self.env,
            self.runtime_env(environment_id),
            function=self.function,
            environment_id=environment_id,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
        )
        process = launch(self._rie, self.handler, port, env)
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
        done = threading.Event()
        watch = threading.Thread(target=self._watch_memory, args=(environment, done), daemon=True)
        watch.start()
        context = getattr(item, "client_context", None)  # the Invoke's, passed on as Lambda does
        answered = post(environment, event, self.timeout_s, client_context=context)
        done.set()
        if not environment.exit_reason:  # a last look: a spike between two samples
            self._check_memory(environment)
        if answered is None or environment.exit_reason:
            signal_all(environment, signal.SIGKILL)  # its exit hands the item back
            return
        status, body = answered
        elapsed = round((time.monotonic() - started) * 1000, 2)
        answer_ = answers.read(status, body)
        if not answer_["crashed"]:
            environment.reported.wait(2)  # the REPORT line follows the answer (none on a crash)
        answer_.update(duration_ms=elapsed, peak_rss_mb=peak_rss_mb(environment.process.pid))
        answer_["log"] = log_text(environment)  # START..REPORT
        environment.runtime_pids = descendants(environment.process.pid)
        with self._lock:
            environment.cold = bool(answer_["reset"])  # a timeout or a crash: init again
            if answer_["timed_out"]:
                self.timeouts += 1
            if environment.busy is item:
                self._on_answer(environment, answer_)

    def _watch_memory(self, environment: Environment, done: threading.Event) -> None:
        """While an invocation runs: its runtime's peak memory, every 50 ms."""
        while not done.wait(0.05):
            if self._check_memory(environment):
                return

    def _check_memory(self, environment: Environment) -> bool:
        """Past MemorySize: the environment killed, as Lambda kills it (True)."""
        peak = peak_rss_mb(environment.process.pid)
        if peak <= self.memory_mb:
            return False
        environment.exit_reason = "signal: killed"
        self.write_log(
            f"{self.function} runtime used {peak} MB, past its MemorySize of {self.memory_mb} "
            "MB: killed, as Lambda kills it"
        )
        signal_all(environment, signal.SIGKILL)
        return True

    def _stream(self, environment: Environment, output: IO[bytes]) -> None:
        """The environment's log, each line labelled with its invocation's RequestId (and
        job): the runtime's, which its START line, the handler's context and Powertools'
        log fields carry (the emulator makes its own; the stack's event id stays in its
        timeline)."""
        request = "-"
        for raw in output:
            line = raw.decode(errors="replace").rstrip("\n")
            if started := START.match(line):
                request = started.group(1)
            environment.log.append(line)
            self.write_log(label(self.function, request, line))
            if REPORT.match(line):
                environment.reported.set()
        environment.process.wait()
        kill_orphans(environment.runtime_pids)  # orphaned when the RIE itself was killed
        with self._lock:
            if environment in self._envs:
                self._envs.remove(environment)
            if environment.retire_timer is not None:
                environment.retire_timer.cancel()
            self._on_exit(environment)

    def _thaw(self, environment: Environment, request_id: str | None) -> None:
        if environment.frozen:
            signal_all(environment, signal.SIGCONT)
            environment.frozen = False
            self._timeline.record(
                "thaw",
                function=self.function,
                request_id=request_id,
                detail=f"pid {environment.process.pid}",
            )

    def _retire_if_idle(self, environment: Environment) -> None:
        with self._lock:
            if environment.busy is None and environment in self._envs:
                self._retire(environment)

    def _retire(self, environment: Environment) -> None:
        """Stop it: thawed first (a stopped process acts on no signal but KILL), then TERM."""
        environment.retired = True
        self._thaw(environment, None)
        signal_all(environment, signal.SIGTERM)
