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


def main() -> int:
    pipe = PipeKicker(int(os.environ["PGKICK_LOCAL_PIPE_FD"]))
    handler = load_handler()
    for line in sys.stdin:
        request = json.loads(line)
        context = FakeLambdaContext(
            function_name="pgkick-worker-local", timeout_ms=int(request["timeout_ms"])
        )
        pipe.send({"started": True})
        sessions_before = opened.count
        try:
            result = handler(request["event"], context)
        except Exception as exc:  # reported like Lambda's "Unhandled" error
            traceback.print_exc()
            result = {"error": f"{type(exc).__name__}: {exc}"}
        result = _marshalled(result)
        pipe.send(
            {
                "result": result,
                "peak_rss_mb": round(_peak_rss_kb() / 1024),
                "db_sessions": opened.count - sessions_before,
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
