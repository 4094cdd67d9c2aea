"""One local execution environment: `python -m pgkick_dev.local.env`, started by LocalKicker.

It imports the handler once (the cold start): `PGKICK_LOCAL_HANDLER`
("module:function"), by default `pgkick.aws.worker:handler` from the installed package.
Then it serves invocations read from stdin, one JSON line each, with a fresh
fake Lambda context per invocation, and reports each result (and the database
sessions it opened) to the parent on the pipe. It exits when stdin closes.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from pgkick.connections.db import opened
from pgkick.kick.kickers import kick_event
from pgkick_dev.local.context import FakeLambdaContext

DEFAULT_HANDLER = "pgkick.aws.worker:handler"  # from the installed package, as an app deploys it


class PipeKicker:
    """Inside a local environment: hand kicks and wake-ups back to the parent LocalKicker."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", buffering=1)
        self._lock = threading.Lock()

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.send({"kick": kick_event(queue, reason, hop)})

    def wake_at(self, queue: str, when: datetime) -> None:
        self.send({"wake": {"queue": queue, "at": when.isoformat()}})

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        self.send({"rescue": {"queue": queue, "at": when.isoformat(), "name": name}})

    def cancel_rescue(self, name: str) -> None:
        self.send({"cancel_rescue": name})

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(message) + "\n")


def load_handler(name: str = DEFAULT_HANDLER) -> Any:
    """The handler `PGKICK_LOCAL_HANDLER` names ("module:function", as Lambda's Handler
    setting names it), imported once: the cold start."""
    module_name, _, function = (os.environ.get("PGKICK_LOCAL_HANDLER") or name).partition(":")
    return getattr(importlib.import_module(module_name), function or "handler")


def _peak_rss_kb() -> int:
    """This process's peak RSS (Lambda's "Max Memory Used"). VmHWM, not ru_maxrss: after
    fork and exec, ru_maxrss still holds the parent's size at the fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _marshalled(result: Any) -> Any:
    """The answer as Lambda's runtime would send it: plain JSON or a Runtime.MarshalError
    (no default=str: a datetime in an answer must fail here as it fails on AWS)."""
    try:
        return json.loads(json.dumps(result))
    except (TypeError, ValueError) as exc:
        return {"error": f"Runtime.MarshalError: {exc}"}


def _trace_id(request_id: str, lineage: int) -> str:
    """X-Ray's trace header as Lambda sets it for an invocation; botocore copies it into
    the calls this invocation makes (recursion detection), Lineage counting the hops."""
    root = request_id.replace("-", "")[:24]
    return f"Root=1-{root[:8]}-{root[8:]};Parent={root[:16]};Sampled=0;Lineage=1a2b3c4d:{lineage}"


def main() -> int:
    pipe = PipeKicker(int(os.environ["PGKICK_LOCAL_PIPE_FD"]))
    handler = load_handler()
    for line in sys.stdin:
        request = json.loads(line)
        function = str(request.get("function") or "pgkick-worker-local")
        context = FakeLambdaContext(function_name=function, timeout_ms=int(request["timeout_ms"]))
        if request.get("request_id"):
            context.aws_request_id = str(request["request_id"])
        os.environ["AWS_LAMBDA_FUNCTION_NAME"] = function
        os.environ["_X_AMZN_TRACE_ID"] = _trace_id(
            context.aws_request_id, int(request.get("lineage", 0)) + 1
        )
        print(f"START RequestId: {context.aws_request_id} Version: $LATEST", flush=True)
        pipe.send({"started": True})
        sessions_before = opened.count
        started = time.monotonic()
        failure: dict[str, Any] | None = None
        try:
            result = handler(request["event"], context)
        except Exception as exc:  # reported like Lambda's "Unhandled" error
            traceback.print_exc()
            result = {"error": f"{type(exc).__name__}: {exc}"}
            failure = {
                "errorMessage": str(exc),
                "errorType": type(exc).__name__,
                "stackTrace": traceback.format_tb(exc.__traceback__),
            }
        result = _marshalled(result)
        if (
            failure is None
            and isinstance(result, dict)
            and "Runtime.MarshalError" in str(result.get("error", ""))
        ):
            failure = {"errorMessage": result["error"], "errorType": "Runtime.MarshalError"}
        elapsed = (time.monotonic() - started) * 1000
        peak = round(_peak_rss_kb() / 1024)
        print(f"END RequestId: {context.aws_request_id}", flush=True)
        print(
            f"REPORT RequestId: {context.aws_request_id}\tDuration: {elapsed:.2f} ms\t"
            f"Max Memory Used: {peak} MB",
            flush=True,
        )
        sys.stderr.flush()
        pipe.send(
            {
                "result": result,
                "failure": failure,
                "duration_ms": round(elapsed, 2),
                "peak_rss_mb": peak,
                "db_sessions": opened.count - sessions_before,
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
