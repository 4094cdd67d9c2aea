"""Lambda's Invoke API on the dev server: what boto3's `lambda.invoke` sends, answered as AWS does.

POST /2015-03-31/functions/{FunctionName}/invocations[?Qualifier=...], with
FunctionName and Qualifier read as Lambda reads them (pgkick_dev.devserver.function_names)
and X-Amz-Invocation-Type:
- `Event`: 202 and an empty body once the event is in the function's queue;
- `RequestResponse` (the default): 200 with the handler's answer, or with its error
  ({"errorType", "errorMessage", ...}) and `X-Amz-Function-Error: Unhandled`; with
  `X-Amz-Log-Type: Tail`, the last 4 KB of the invocation's log in `X-Amz-Log-Result`;
  429 TooManyRequestsException when every environment is busy (or the cap is 0);
  400 RecursiveInvocationException for the 17th invocation of a chain, not run;
- `DryRun`: 204.
Errors are Lambda's: status, `x-amzn-ErrorType`, and {"Type", "message"}, which
botocore turns into the same exception classes (ResourceNotFoundException,
InvalidRequestContentException, ...). Payload limits are the documented ones, 1 MB
asynchronous, 6 MB synchronous, refused as AWS refuses them: 413
RequestEntityTooLargeException, a code botocore has no class for. Signatures are checked as AWS
checks them (pgkick_dev.devserver.signatures). The chain an event
belongs to is read where AWS reads it, the Lineage in X-Amzn-Trace-Id (botocore
copies it from the calling invocation's _X_AMZN_TRACE_ID), except for the stack's own
environments: the emulator does not pass that header to the runtime, so their
endpoint names them (`/_env/<id>/2015-03-31/...`) and the stack counts one hop past
the invocation that environment is running.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pgkick_dev.devserver.function_names import NameRefused
from pgkick_dev.devserver.invocations import LoopStopped, Throttled
from pgkick_dev.devserver.signatures import request_refusal
from pgkick_dev.devserver.stack import Stack

ASYNC_LIMIT = 1_048_576  # bytes: "For asynchronous invocations, the maximum payload size is 1 MB"
SYNC_LIMIT = 6_291_456  # bytes: 6 MB for synchronous invocations
LOG_TAIL = 4096  # bytes of the log LogType Tail returns
CLIENT_CONTEXT_LIMIT = 3583  # bytes of base64 (the Invoke API's ClientContext)
# the code AWS answers an oversized request with, in its words below (aws/aws-sdk#45,
# ASFHyP3/hyp3#2241): not the model's RequestTooLargeException, so botocore raises a bare
# ClientError, and an `except ....RequestTooLargeException` catches nothing on AWS either
TOO_LARGE = "RequestEntityTooLargeException"
_LINEAGE = re.compile(r"Lineage=[0-9a-f]+:(\d+)")


def error(code: str, status: int, message: str, request_id: str) -> JSONResponse:
    """Lambda's error shape, as botocore's rest-json parser reads it."""
    headers = {"x-amzn-ErrorType": code, "x-amzn-RequestId": request_id}
    return JSONResponse({"Type": "User", "message": message}, status, headers=headers)


def _not_json(token: str) -> Any:
    """NaN, Infinity, -Infinity: Python's json reads them, Lambda's parser (strict JSON, its
    "Could not parse request body into json" comes from Jackson) refuses them."""
    raise ValueError(f"Non-standard token '{token}'")


def client_context_refusal(header: str | None) -> str | None:
    """Why AWS refuses an X-Amz-Client-Context (None: it takes it): the Invoke API reads it
    as "up to 3,583 bytes of base64-encoded data", a JSON object ("Client context must be a
    valid Base64-encoded JSON object", its words; the size's wording is the stand-in's)."""
    if header is None:
        return None
    if len(header.encode()) > CLIENT_CONTEXT_LIMIT:
        return f"Client context must be at most {CLIENT_CONTEXT_LIMIT} bytes of base64-encoded data"
    try:
        decoded = json.loads(base64.b64decode(header, validate=True), parse_constant=_not_json)
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        decoded = None
    if not isinstance(decoded, dict):
        return "Client context must be a valid Base64-encoded JSON object."
    return None


def log_result(log: str) -> str:
    """X-Amz-Log-Result: "The last 4 KB of the execution log, which is base64-encoded"
    (the Invoke API's LogResult), the log being the invocation's lines, START to REPORT."""
    return base64.b64encode(log.encode()[-LOG_TAIL:]).decode()


def lineage(request: Request) -> int:
    found = _LINEAGE.search(request.headers.get("x-amzn-trace-id", ""))
    return int(found.group(1)) if found else 0


def routes(stack: Stack) -> list[Route]:
    async def invoke(request: Request) -> Response:
        request_id = str(uuid.uuid4())
        refused = await request_refusal(request, "lambda")  # AWS checks it first
        if refused is not None:
            return error(refused[0], 403, refused[1], request_id)
        try:
            name, qualifier = request.path_params["name"], request.query_params.get("Qualifier")
            queue = stack.resolve(name, qualifier)
        except NameRefused as refused_name:
            return error(refused_name.code, refused_name.status, refused_name.message, request_id)
        kind = request.headers.get("x-amz-invocation-type", "RequestResponse")
        if kind not in ("Event", "RequestResponse", "DryRun"):
            message = (
                f"1 validation error detected: Value '{kind}' at 'invocationType' failed to "
                "satisfy constraint: Member must satisfy enum value set: "
                "[Event, RequestResponse, DryRun]"
            )
            return error("InvalidParameterValueException", 400, message, request_id)
        log_type = request.headers.get("x-amz-log-type", "None")
        if log_type not in ("None", "Tail"):  # the model's enum
            message = (
                f"1 validation error detected: Value '{log_type}' at 'logType' failed to "
                "satisfy constraint: Member must satisfy enum value set: [None, Tail]"
            )
            return error("InvalidParameterValueException", 400, message, request_id)
        context_refused = client_context_refusal(request.headers.get("x-amz-client-context"))
        if context_refused is not None:
            return error("InvalidRequestContentException", 400, context_refused, request_id)
        body = await request.body()
        if kind == "Event" and len(body) > ASYNC_LIMIT:
            message = (
                f"{len(body)} byte payload is too large for the Event invocation type "
                f"(limit {ASYNC_LIMIT} bytes)"
            )
            return error(TOO_LARGE, 413, message, request_id)
        if len(body) > SYNC_LIMIT:
            message = (
                f"Request must be smaller than {SYNC_LIMIT} bytes for the InvokeFunction operation"
            )
            return error(TOO_LARGE, 413, message, request_id)
        try:
            event = json.loads(body, parse_constant=_not_json) if body.strip() else {}
        except (ValueError, UnicodeDecodeError) as exc:
            message = f"Could not parse request body into json: {str(exc)[:200]}"
            return error("InvalidRequestContentException", 400, message, request_id)
        if kind == "DryRun":
            return Response(status_code=204, headers={"x-amzn-RequestId": request_id})
        hops = lineage(request)
        sender = request.path_params.get("environment")
        if sender is not None:
            with stack.lock:
                counted = stack.sender_lineage(sender)
            hops = hops if counted is None else counted
        if kind == "Event":
            request_id = queue.submit(event, lineage=hops, request_id=request_id)
            return Response(status_code=202, headers={"x-amzn-RequestId": request_id})
        try:
            request_id, answer = await run_in_threadpool(
                queue.invoke_sync,
                event,
                lineage=hops,
                client_context=request.headers.get("x-amz-client-context"),
            )
        except Throttled:
            headers = {
                "x-amzn-ErrorType": "TooManyRequestsException",
                "x-amzn-RequestId": request_id,
            }
            body_ = {
                "Reason": stack.throttle_reason(queue),
                "Type": "User",
                "message": "Rate Exceeded.",
            }
            return JSONResponse(body_, 429, headers=headers)
        except LoopStopped:
            message = (
                "Lambda has detected your function being invoked in a recursive loop with "
                "other AWS resources and stopped your function's invocation."
            )
            return error("RecursiveInvocationException", 400, message, request_id)
        headers = {"x-amzn-RequestId": request_id, "X-Amz-Executed-Version": "$LATEST"}
        if log_type == "Tail":
            headers["X-Amz-Log-Result"] = log_result(answer.get("log", ""))
        if answer["failure"] is not None:
            headers["X-Amz-Function-Error"] = "Unhandled"
            return JSONResponse(answer["failure"], 200, headers=headers)
        return Response(
            json.dumps(answer["result"]), 200, headers=headers, media_type="application/json"
        )

    return [
        Route("/2015-03-31/functions/{name}/invocations", invoke, methods=["POST"]),
        Route(
            "/_env/{environment}/2015-03-31/functions/{name}/invocations", invoke, methods=["POST"]
        ),
    ]
