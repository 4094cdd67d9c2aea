"""One execution environment's processes: AWS's Runtime Interface Emulator and its runtime.

Why apart from the pool (pgkick_dev.devserver.environments): the pool decides when an
environment starts, runs, freezes and retires; this module is how that is done to the
operating system, with nothing of the pool's state. It starts the RIE (found by
pgkick_dev.devserver.rie) on a free port with awslambdaric as its runtime (both dying
with the server: pgkick_dev.devserver.lifeline) and the variables Lambda sets
(AWS_LAMBDA_FUNCTION_TIMEOUT, memory size, name, log group and stream, initialization
type), posts an invocation to it over HTTP as Lambda's service would, labels its log
lines, signals its whole process tree (the RIE starts its runtime in a process group of
its own, so the RIE's group alone is not enough) and reads /proc for what Lambda reports
and the RIE does not: the runtime's peak memory.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgkick_dev.devserver import lifeline
from pgkick_dev.devserver.clock import Cancellable
from pgkick_dev.devserver.ports import free_port, wait_for_own_listener

INVOKE_PATH = "/2015-03-31/functions/function/invocations"
START = re.compile(r"^START RequestId: (\S+)")
REPORT = re.compile(r"^REPORT RequestId: ")
JOB = re.compile(r"\bjob[ _]?(?:id)?\"?[:= ]\s*(\d+)|\bjob (\d+)\b")


LOG_LINES_KEPT = 4096  # lines of at least a byte each: enough for the 4 KB tail


@dataclass
class Environment:
    process: subprocess.Popen[bytes]
    port: int
    id: str
    busy: Any = None  # the owner's invocation while one runs
    cold: bool = True  # the next invocation initialises the runtime (first, or after a reset)
    retired: bool = False
    frozen: bool = False
    listening: bool = False  # its RIE was seen listening on `port` (pgkick_dev.devserver.ports)
    retire_timer: Cancellable | None = None
    reported: threading.Event = field(default_factory=threading.Event)
    runtime_pids: list[int] = field(default_factory=list)  # the RIE's children, last seen
    exit_reason: str = ""  # why the stack killed it ("signal: killed": past its MemorySize)
    # the running invocation's last lines, for LogType Tail's 4 KB (bounded: a long
    # invocation's log is not kept whole)
    log: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES_KEPT))


def log_text(environment: Environment) -> str:
    """The running invocation's log lines as one text (LogType Tail's source)."""
    return "".join(f"{line}\n" for line in environment.log)


def function_env(
    base: Mapping[str, str],
    runtime_env: Mapping[str, str],
    *,
    function: str,
    environment_id: str,
    timeout_s: int,
    memory_mb: int,
) -> dict[str, str]:
    """The environment's variables: the app's, the stack's endpoints, and Lambda's own."""
    env = {
        **base,
        **runtime_env,
        "AWS_LAMBDA_FUNCTION_NAME": function,
        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(timeout_s),
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",  # the RIE leaves it unset; Lambda does not
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function}",  # as Lambda sets them
        "AWS_LAMBDA_LOG_STREAM_NAME": f"{time.strftime('%Y/%m/%d')}/[$LATEST]{environment_id}",
        "LAMBDA_TASK_ROOT": os.getcwd(),
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE"):
        env.pop(name, None)  # the dummy credentials alone: nothing of the developer's
    return env


def launch(rie: Path, handler: str, port: int, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """The RIE serving invocations on `port`, its runtime Lambda's runtime client; both
    die with the server, however it stops (pgkick_dev.devserver.lifeline)."""
    argv = [
        str(rie),
        "--log-level",
        "error",
        "--runtime-interface-emulator-address",
        f"127.0.0.1:{port}",
        "--runtime-api-address",
        f"127.0.0.1:{free_port()}",
        sys.executable,
        "-m",
        "pgkick_dev.devserver.lifeline",  # awslambdaric, dying with the RIE
        handler,
    ]
    return lifeline.spawn(
        lambda: subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: frozen whole; Ctrl-C is the server's
            preexec_fn=lifeline.preexec,
        )
    )


def post(
    environment: Environment, event: bytes, timeout_s: int, *, client_context: str | None = None
) -> tuple[int, bytes] | None:
    """One invocation through the RIE: its HTTP status and body, or None when it could not
    be delivered (the caller kills the environment, whose exit hands the item back).
    client_context: the Invoke's ClientContext (base64), which the RIE takes as Lambda's
    service does, in X-Amz-Client-Context, and hands the runtime as
    Lambda-Runtime-Client-Context (awslambdaric's context.client_context)."""
    headers = {} if client_context is None else {"X-Amz-Client-Context": client_context}
    url = f"http://127.0.0.1:{environment.port}{INVOKE_PATH}"
    if not environment.listening:  # a cold RIE listens within milliseconds, or exits
        if not wait_for_own_listener(environment.process, environment.port, timeout=10):
            return None  # exited, or the port is another process's: never post it there
        environment.listening = True
    deadline = time.monotonic() + 10
    while True:
        try:
            request = urllib.request.Request(url, data=event, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=timeout_s + 30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:  # 502: the runtime exited (Runtime.ExitError)
            return exc.code, exc.read()
        except (ConnectionRefusedError, urllib.error.URLError) as exc:
            refused = isinstance(getattr(exc, "reason", exc), ConnectionRefusedError)
            if refused and time.monotonic() < deadline and environment.process.poll() is None:
                time.sleep(0.01)
                continue
            return None
        except OSError:
            return None


def label(function: str, request: str, line: str) -> str:
    """A log line as the stack prints it: the function, the request id, the job it names."""
    job = JOB.search(line)
    said = f"[{request[:8]}{f' job {job.group(1) or job.group(2)}' if job else ''}]"
    return f"{function} {said} {line}"


def signal_all(environment: Environment, signum: int) -> None:
    """To the RIE's process group and to every process under it: the RIE starts its
    runtime in a process group of its own."""
    pids = [environment.process.pid, *descendants(environment.process.pid)]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(environment.process.pid, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def kill_orphans(pids: list[int]) -> None:
    """The runtime's processes, orphaned when the RIE itself was killed."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (children of any of its threads, recursively)."""
    found: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        tasks = Path(f"/proc/{pid}/task").glob("*/children")
        for child in sorted({int(c) for task in tasks for c in task.read_text().split()}):
            found += [child, *descendants(child)]
    return found


def peak_rss_mb(rie_pid: int) -> int:
    """The runtime's peak RSS (Lambda's "Max Memory Used"; the RIE's own REPORT line says
    the memory size instead): VmHWM of the processes under the RIE."""
    peak = 0
    with contextlib.suppress(OSError, ValueError):
        for child in descendants(rie_pid):
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
    return round(peak / 1024)
