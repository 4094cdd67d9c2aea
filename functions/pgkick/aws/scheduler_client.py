"""The two EventBridge Scheduler calls a worker makes, over HTTP, without boto3.

Why: a worker books its rescue (CreateSchedule) before its first job runs and removes it
(DeleteSchedule) when it leaves. Through boto3 the first booking of an environment cost
0.4 s of imports and client set-up, and each job committed meanwhile waited for it: the
trickle's p99 (227..414 ms from the first claim against 3..4 ms after the first batch)
and half the cold path's commit to finish (813 ms against 417 ms to the claim). These
two calls are plain REST-JSON; signed here (pgkick.aws.signature) they cost an import of
the standard library's http.client and one round trip.

Where: only inside a Lambda runtime (AWS_LAMBDA_FUNCTION_NAME set; AWS's or the
emulator's), with the credentials and region Lambda puts in the environment, and no
FIPS or dual-stack endpoint asked for. Anywhere else (an app, the CLI, a test with
moto), `available()` is None and the kicker uses boto3, with its whole credential
chain. Failures look like botocore's where pgkick reads them: `error_code(exc)` gives
AWS's code (ConflictException, ResourceNotFoundException, ThrottlingException), so the
kicker's backoff and its "booked already" and "gone already" cases are unchanged. As
botocore's standard mode with two attempts (pgkick.kick.lambda_kicker.aws_client), a
call is tried twice when the connection fails, times out, or AWS answers 5xx.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Self
from urllib.parse import quote, urlsplit

from pgkick.aws.signature import Credentials, canonical_query, sign

ATTEMPTS = 2  # as aws_client's botocore: total_max_attempts 2


class SchedulerCallError(Exception):
    """AWS refused the call. `.response` has botocore's shape (Error.Code, Error.Message)."""

    def __init__(self, operation: str, code: str, message: str, status: int) -> None:
        super().__init__(f"Scheduler {operation}: {code}: {message} (HTTP {status})")
        self.operation_name = operation
        self.response = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


def _true(name: str, env: Mapping[str, str]) -> bool:
    return env.get(name, "").strip().lower() == "true"


def _endpoint(region: str, env: Mapping[str, str]) -> str:
    """As boto3 resolves it: the service's variable, then the global one, then AWS's."""
    if not _true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", env):
        for name in ("AWS_ENDPOINT_URL_SCHEDULER", "AWS_ENDPOINT_URL"):
            if env.get(name):
                return env[name].rstrip("/")
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://scheduler.{region}.{suffix}"


def _error(operation: str, status: int, headers: http.client.HTTPMessage, body: bytes) -> Exception:
    """AWS's code from x-amzn-ErrorType ("Code:details") or the body's __type/code."""
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        parsed = {}
    parsed = parsed if isinstance(parsed, dict) else {}
    code = (headers.get("x-amzn-ErrorType") or "").split(":")[0]
    code = code or str(parsed.get("__type") or parsed.get("code") or "").split("#")[-1]
    message = str(parsed.get("Message") or parsed.get("message") or body[:200].decode("replace"))
    return SchedulerCallError(operation, code or f"HTTP{status}", message, status)


class SchedulerClient:
    """create_schedule and delete_schedule, as boto3's client takes and answers them
    (boto3's parameter names, so the kicker calls either client the same way)."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        credentials: Callable[[], Credentials],
        *,
        timeout: float = 2.0,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        trace_id: Callable[[], str | None] = lambda: None,
    ) -> None:
        parts = urlsplit(endpoint)
        self.https = parts.scheme == "https"
        self.netloc, self.base = parts.netloc, parts.path.rstrip("/")
        self.region, self.credentials = region, credentials
        self.timeout, self.now, self.trace_id = timeout, now, trace_id
        self._idle: list[http.client.HTTPConnection] = []  # kept alive between calls
        self._lock = threading.Lock()  # the wake-up thread and the worker share them

    @classmethod
    def available(cls, timeout: float, env: Mapping[str, str] = os.environ) -> Self | None:
        """The client for a Lambda runtime's environment; None outside one (use boto3)."""
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not (
            env.get("AWS_LAMBDA_FUNCTION_NAME")
            and env.get("AWS_ACCESS_KEY_ID")
            and env.get("AWS_SECRET_ACCESS_KEY")
            and region
        ) or any(_true(n, env) for n in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT")):
            return None

        def credentials() -> Credentials:  # read at each call, as Lambda set them
            return Credentials(
                env["AWS_ACCESS_KEY_ID"],
                env["AWS_SECRET_ACCESS_KEY"],
                env.get("AWS_SESSION_TOKEN") or None,
            )

        return cls(
            _endpoint(region, env),
            region,
            credentials,
            timeout=timeout,
            trace_id=lambda: env.get("_X_AMZN_TRACE_ID"),  # botocore sends it from Lambda
        )

    def create_schedule(self, *, Name: str, **fields: Any) -> dict[str, Any]:
        body = {"ClientToken": str(uuid.uuid4())} | fields  # one token, kept by the retry
        return self._call("CreateSchedule", "POST", Name, {}, json.dumps(body).encode())

    def delete_schedule(
        self,
        *,
        Name: str,
        GroupName: str | None = None,
        ClientToken: str | None = None,
    ) -> dict[str, Any]:
        query = {"clientToken": ClientToken or str(uuid.uuid4())}
        if GroupName:
            query["groupName"] = GroupName
        return self._call("DeleteSchedule", "DELETE", Name, query, b"")

    def _call(
        self, operation: str, method: str, name: str, query: dict[str, str], body: bytes
    ) -> dict[str, Any]:
        path = f"{self.base}/schedules/{quote(name, safe='')}"
        last: Exception | None = None
        for _ in range(ATTEMPTS):
            try:
                status, headers, answer = self._send(method, path, query, body)
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
                last = exc
                with self._lock:  # kept alive across a freeze, the others are stale too
                    idle, self._idle = self._idle, []
                for stale in idle:
                    stale.close()
                continue
            if 200 <= status < 300:
                parsed = json.loads(answer or b"{}")
                return parsed if isinstance(parsed, dict) else {}
            last = _error(operation, status, headers, answer)
            if status < 500:
                raise last
        assert last is not None
        raise last

    def _send(
        self, method: str, path: str, query: dict[str, str], body: bytes
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        headers = {"Content-Type": "application/json"} if body else {}
        headers = sign(
            self.credentials(),
            region=self.region,
            service="scheduler",
            method=method,
            host=self.netloc,
            path=path,
            query=query,
            headers=headers,
            body=body,
            now=self.now(),
        )
        headers["User-Agent"] = "pgkick"
        trace = self.trace_id()
        if trace:
            headers["X-Amzn-Trace-Id"] = trace  # unsigned, as botocore leaves it
        target = path + ("?" + canonical_query(query) if query else "")
        connection = self._connection()
        try:
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            answer = response.read()
        except BaseException:
            connection.close()  # half-used: never handed to the next call
            raise
        with self._lock:
            self._idle.append(connection)
        return response.status, response.headers, answer

    def _connection(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.netloc, timeout=self.timeout)
