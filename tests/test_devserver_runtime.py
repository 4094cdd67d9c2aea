"""The dev stack's environments answer as Lambda does, because they are AWS's own code:
the Runtime Interface Emulator running Lambda's runtime client (awslambdaric). Each test
fails against a stand-in kinder than AWS (json.dumps with a default, a context made up
by the stack, an error turned into a string, a timeout that leaves the process warm).
Driven through boto3 over HTTP, as an app drives Lambda."""

from __future__ import annotations

import base64
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from pgkick_dev.devserver import rie
from tests.devserver_fixtures import FUNCTION, dev_stack

ROOT = Path(__file__).parent.parent


def _invoke(dev: Any, event: Any = None) -> tuple[dict[str, Any], Any]:
    answer = dev.lambda_.invoke(FunctionName=FUNCTION, Payload=json.dumps(event or {}).encode())
    return answer, json.loads(answer["Payload"].read())


def test_an_answer_that_is_not_json_is_a_marshal_error() -> None:
    """A datetime in the answer: Lambda's runtime cannot marshal it (json.dumps with
    default=str, a kind stand-in, would answer a string)."""
    with dev_stack("tests.devserver_handlers:unmarshallable") as dev:
        answer, payload = _invoke(dev)
    assert answer["StatusCode"] == 200 and answer["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "Runtime.MarshalError"
    assert payload["errorMessage"].startswith("Unable to marshal response: Object of type datetime")


def test_the_context_is_lambdas_own_with_the_functions_timeout_and_memory() -> None:
    """The remaining time counts down from the function's timeout; the memory size is a
    string, as awslambdaric reads it from AWS_LAMBDA_FUNCTION_MEMORY_SIZE (a made-up
    context says 512, an int)."""
    with dev_stack("tests.devserver_handlers:context_seen", timeout_ms=3_000) as dev:
        _, first = _invoke(dev)
        _, warm = _invoke(dev)
    for seen in (first, warm):
        assert 0 < seen["remaining_ms"] <= 3_000
    assert warm["remaining_ms"] > 2_500  # a warm invocation starts with nearly all of it
    assert first["memory_limit_in_mb"] == "512" and first["function_name"] == FUNCTION
    assert first["function_version"] == "$LATEST"
    assert first["log_group_name"] == f"/aws/lambda/{FUNCTION}"
    assert first["initialization_type"] == "on-demand"  # the emulator alone leaves it unset


def test_the_client_context_given_to_invoke_reaches_the_handler() -> None:
    """Catches a ClientContext dropped on the way (the handler's context.client_context
    None). Source: the Invoke API (botocore's model, InvocationRequest.ClientContext): "Up to
    3,583 bytes of base64-encoded data about the invoking client to pass to the function in
    the context object" (synchronous invocations only); the emulator takes it as
    X-Amz-Client-Context and awslambdaric reads it from Lambda-Runtime-Client-Context."""
    given = {"client": {"installation_id": "i-1"}, "custom": {"k": "v"}, "env": {"e": "1"}}
    encoded = base64.b64encode(json.dumps(given).encode()).decode()
    with dev_stack("tests.devserver_handlers:context_seen") as dev:
        answer = dev.lambda_.invoke(FunctionName=FUNCTION, Payload=b"{}", ClientContext=encoded)
        seen = json.loads(answer["Payload"].read())
        _, without = _invoke(dev)  # the next invocation has none of it
    assert seen["client_context"] == {"k": "v"} and without["client_context"] is None


def test_the_log_prefix_is_the_request_id_the_handler_and_start_line_show() -> None:
    """Catches (note 60) lines labelled with the stack's own event id while the START and
    END lines, the handler's context and Powertools' log fields all carry the runtime's
    RequestId (docs/develop/local.md shows the prefix and START's id as one)."""
    with dev_stack("tests.devserver_handlers:context_seen") as dev:
        _, seen = _invoke(dev)
        dev.wait(lambda: any(" END RequestId: " in line for line in dev.logs))
    request = seen["aws_request_id"]
    start = next(line for line in dev.logs if " START RequestId: " in line)
    assert f"START RequestId: {request}" in start
    assert f"[{request[:8]}]" in start
    assert all(f"[{request[:8]}" in line for line in dev.logs if "RequestId" in line)


def test_an_unhandled_error_has_lambdas_shape() -> None:
    """errorType, errorMessage and the stack trace as a list of lines, with
    X-Amz-Function-Error: Unhandled; not a string the stand-in formatted."""
    with dev_stack("tests.devserver_handlers:boom") as dev:
        answer, payload = _invoke(dev)
    assert answer["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "ValueError" and payload["errorMessage"] == "boom"
    assert payload["requestId"]  # the runtime's own request id, as Lambda's payload has
    assert isinstance(payload["stackTrace"], list) and payload["stackTrace"]
    assert all(isinstance(line, str) for line in payload["stackTrace"])
    assert any("devserver_handlers.py" in line for line in payload["stackTrace"])


def test_a_timeout_is_task_timed_out_and_the_next_invocation_is_a_cold_start() -> None:
    """Past the function's timeout Lambda stops the invocation and resets the
    environment: the next one initialises afresh (new process, module state gone)."""
    with dev_stack("tests.devserver_handlers:sleeper", timeout_ms=1_000, concurrency=1) as dev:
        _, first = _invoke(dev)
        answer, timed_out = _invoke(dev, {"sleep": 5})
        _, after = _invoke(dev)
        pool = dev.stack.functions[FUNCTION].pool
        cold_starts, timeouts = pool.cold_starts, pool.timeouts
    assert first["invocations"] == 1
    assert answer["FunctionError"] == "Unhandled"
    assert timed_out["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 1.00 seconds" in timed_out["errorMessage"]
    assert after["invocations"] == 1 and after["pid"] != first["pid"]  # initialised again
    assert (cold_starts, timeouts) == (2, 1)


def test_the_emulator_is_found_or_the_refusal_says_what_to_do(tmp_path: Path) -> None:
    """PGKICK_DEV_RIE naming nothing, or nothing found and PyPI unreachable: a refusal
    naming the variable and the SAM CLI to install."""
    with pytest.raises(rie.RieMissing, match=r"PGKICK_DEV_RIE=.* is not an executable file"):
        rie.locate({"PGKICK_DEV_RIE": str(tmp_path / "nothing")})

    def unreachable(target: Path, say: Any) -> Path:
        raise OSError("PyPI is unreachable")

    env = {"PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    if any(path.exists() for path in rie.candidates(env)):  # this checkout's .venv-sam
        assert rie.locate(env, fetch=unreachable).name == rie.binary_name()
        return
    with pytest.raises(rie.RieMissing, match=r"pip install aws-sam-cli==.*PGKICK_DEV_RIE"):
        rie.locate(env, fetch=unreachable)


def test_the_emulator_fetched_is_the_sam_cli_the_tests_install() -> None:
    pins = (ROOT / "infra" / "sam-requirements.txt").read_text().splitlines()
    assert f"aws-sam-cli=={rie.SAM_VERSION}" in pins


def test_a_runtime_killed_during_its_init_is_a_failure_retried_as_on_lambda(
    tmp_path: Path,
) -> None:
    """The emulator answers 502 with no body when the runtime dies while importing the
    handler: a failed invocation (retried when asynchronous), never an empty success."""
    gate = tmp_path / "gate"
    with dev_stack(
        "tests.devserver_slow_init:handler",
        env={"PGKICK_TEST_GATE": str(gate)},
        retry_delays=(0.0, 0.0),
        max_retries=1,
    ) as dev:
        dev.lambda_.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")
        dev.wait(lambda: bool(dev.stack.functions[FUNCTION].pool.busy()))
        pool = dev.stack.functions[FUNCTION].pool
        dev.wait(lambda: bool(pool.runtimes(pool.busy()[0])) if pool.busy() else False)
        with dev.stack.lock:
            (runtime,) = pool.runtimes(pool.busy()[0])
        os.kill(runtime, signal.SIGKILL)
        gate.touch()  # the retry's init goes through
        dev.wait(lambda: "retry" in dev.kinds())
        dev.clock.advance(0.0)  # the retry's delay (scaled to 0 s) on the stack's clock
        dev.wait(lambda: dev.stack.functions[FUNCTION].stats.invocations == 2 and dev.stack.idle())
        stats = dev.stack.functions[FUNCTION].stats
    assert stats.crashes == 1 and stats.retries == 1 and stats.failed_kicks == []
    assert stats.results[0]["error"].startswith("Runtime.ExitError")
    assert stats.results[1] == {"initialised": True}


def test_a_runtime_past_its_memory_size_is_killed_and_its_event_retried() -> None:
    """Catches MemorySize only exported to the context: at 128 MB a handler touching 300 MB
    succeeded (the stack's own measure said so). Lambda kills the runtime (Runtime.ExitError,
    "signal: killed"), discards the environment and retries an asynchronous event."""
    with dev_stack("tests.devserver_handlers:hog", memory_mb=128, max_retries=1) as dev:
        lam = dev.lambda_
        within = lam.invoke(FunctionName=FUNCTION, Payload=json.dumps({"mb": 10}).encode())
        assert "FunctionError" not in within
        killed = lam.invoke(FunctionName=FUNCTION, Payload=json.dumps({"mb": 300}).encode())
        error = json.loads(killed["Payload"].read())
        assert killed["FunctionError"] == "Unhandled" and error["errorType"] == "Runtime.ExitError"
        assert error["errorMessage"].endswith("Runtime exited with error: signal: killed")
        lam.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"mb": 300}')
        dev.wait(lambda: "retry" in dev.kinds())
        stats = dev.stack.functions[FUNCTION].stats
        assert stats.crashes == 2 and stats.retries == 1
