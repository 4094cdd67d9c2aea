"""One local execution environment: `python -m pgkick.local_env`, started by LocalKicker.

It imports the worker handler from functions/worker/app.py once (the cold
start), then serves invocations read from stdin, one JSON line each, with a
fresh fake Lambda context per invocation, and reports each result to the
parent on the pipe. It exits when the parent closes stdin.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

from pgkick.context import FakeLambdaContext
from pgkick.local import PipeKicker

HANDLER_FILE = Path(__file__).resolve().parent.parent / "worker" / "app.py"


def load_handler(path: Path = HANDLER_FILE) -> Any:
    spec = importlib.util.spec_from_file_location("pgkick_worker_app", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"no worker handler at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def main() -> int:
    pipe = PipeKicker(int(os.environ["PGKICK_LOCAL_PIPE_FD"]))
    handler = load_handler()
    for line in sys.stdin:
        request = json.loads(line)
        context = FakeLambdaContext(
            function_name="pgkick-worker-local", timeout_ms=int(request["timeout_ms"])
        )
        pipe.send({"started": True})
        try:
            result = handler(request["event"], context)
        except Exception as exc:  # reported like Lambda's "Unhandled" error
            traceback.print_exc()
            result = {"error": f"{type(exc).__name__}: {exc}"}
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # what Lambda reports
        pipe.send({"result": result, "peak_rss_mb": round(peak_kb / 1024)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
