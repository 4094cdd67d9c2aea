"""What an environment's RIE answered, read as Lambda's Invoke API reports it.

Why a module: the RIE answers every invocation 200 (502 when the runtime died) and
leaves out the `X-Amz-Function-Error` header Lambda adds, so the stack reads the body:
- an object with `errorType` and `errorMessage` is the runtime client's error report
  (an unhandled exception, `Runtime.MarshalError`, ...), passed on as it is;
- `Task timed out after N.NN seconds` (plain text) is the RIE's timeout, reported in
  Lambda's shape (`Sandbox.Timedout`); the RIE has reset the runtime;
- a 502 with `Runtime.ExitError`, or with no body (a runtime killed during its
  init), is a crashed runtime, reset too;
- anything else is the handler's answer, already marshalled by awslambdaric.
"""

from __future__ import annotations

import json
from typing import Any

TIMED_OUT = "Task timed out after"


def read(status: int, body: bytes) -> dict[str, Any]:
    """{"result", "failure", "timed_out", "crashed", "reset"} for one RIE answer."""
    text = body.decode(errors="replace")
    out: dict[str, Any] = {"result": None, "failure": None, "timed_out": False, "crashed": False}
    if text.startswith(TIMED_OUT):
        out["timed_out"] = True
        out["failure"] = {"errorType": "Sandbox.Timedout", "errorMessage": f"Error: {text.strip()}"}
    else:
        try:
            value = json.loads(text) if text.strip() else None
        except ValueError:
            value = text  # not JSON: say what came
        if isinstance(value, dict) and "errorType" in value and "errorMessage" in value:
            out["failure"] = value
            out["crashed"] = status == 502 or value["errorType"] == "Runtime.ExitError"
        elif status != 200:  # e.g. 502 with no body: the runtime died during its init
            out["crashed"] = True
            out["failure"] = {
                "errorType": "Runtime.ExitError",
                "errorMessage": f"Error: Runtime exited (the emulator answered {status}"
                + (f": {text[:500]})" if text.strip() else " during the runtime's init)"),
            }
        else:
            out["result"] = value
    if out["failure"] is not None:  # what the stack's stats keep for a failed invocation
        failure = out["failure"]
        out["result"] = {"error": f"{failure['errorType']}: {failure['errorMessage']}"}
    out["reset"] = out["timed_out"] or out["crashed"]
    return out
