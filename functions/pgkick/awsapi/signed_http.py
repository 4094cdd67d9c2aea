"""Signed AWS calls over http.client, for the few a Lambda worker makes, without boto3.

Why: importing boto3 and making a client cost a worker 0.4 s of CPU here before it could
book its rescue, read its database secret or send its first kick, and every job committed
meanwhile waited for it. At the template's 512 MB Lambda gives about 0.29 of a vCPU (1,769 MB
is one), so by arithmetic over a second of a cold start (not measured on AWS). The calls
themselves are four small requests (pgkick.awsapi.scheduler, .secrets, .lambda_invoke):
signed (pgkick.awsapi.signature) they cost an import of the standard library's http.client
and one round trip.

Where: only inside a Lambda runtime (AWS_LAMBDA_FUNCTION_NAME set: AWS's, or the emulator's
in the local stack), with the credentials and region Lambda puts in the environment, no FIPS
or dual-stack endpoint and no proxy asked for (AWS_CA_BUNDLE is honoured, as boto3 honours
it). Anywhere else (an app, the CLI, a test with moto, SnapStart, whose credentials are not
in the environment) `lambda_target()` is None and the caller uses boto3, with its whole
credential chain.

Failures look like botocore's where pgkick reads them: `error_code(exc)` gives AWS's code
(ConflictException, ThrottlingException, ...). As botocore's standard mode with two attempts
(pgkick.awsapi.boto.aws_client), a call is tried twice when the connection fails or times
out (at once), AWS answers 5xx (after botocore's random pause, up to 50 ms), or AWS
throttles it (429, or a throttling code: up to 1 s); the body, and so its idempotency
token, is the same. Any other refusal is raised at once. An endpoint still out of reach
after the second try (refused, reset, timed out, a certificate not trusted), or a 2xx that
is not AWS's JSON (a proxy's page), raises AwsUnavailable naming the call, the endpoint and
the cause: the bare OSError said "[Errno 111] Connection refused" and nothing of where.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from pgkick.awsapi.signature import Credentials, canonical_query, sign, without_session_token
from pgkick.errors import AwsCallError, AwsUnavailable

ATTEMPTS = 2  # as aws_client's botocore: total_max_attempts 2
# botocore's standard mode: what it retries, and the ceiling of its first random pause
THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
     "TooManyRequestsException", "ProvisionedThroughputExceededException",
     "TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
     "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
     "EC2ThrottledException"}
)  # fmt: skip
TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException"})
TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
THROTTLED_PAUSE, TRANSIENT_PAUSE = 1.0, 0.05  # seconds


def _true(name: str, env: Mapping[str, str]) -> bool:
    return env.get(name, "").strip().lower() == "true"


@dataclass(frozen=True)
class LambdaTarget:
    """Where and as whom a call from inside a Lambda runtime goes."""

    endpoint: str
    region: str
    credentials: Callable[[], Credentials]
    trace_id: Callable[[], str | None]  # botocore sends _X_AMZN_TRACE_ID from Lambda
    ca_bundle: str | None = None  # AWS_CA_BUNDLE: certificates to trust instead of the system's


def lambda_target(
    service: str, env_name: str, env: Mapping[str, str] | None = None
) -> LambdaTarget | None:
    """`service`'s endpoint and the runtime's credentials; None outside a Lambda runtime.
    env_name: boto3's endpoint variable's suffix (AWS_ENDPOINT_URL_<env_name>). env: the
    process's by default, read here as boto3 reads it (the one reader of AWS's variables
    outside pgkick.config: they are the SDK's, not pgkick's settings)."""
    env = os.environ if env is None else env
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    inside = env.get("AWS_LAMBDA_FUNCTION_NAME")
    keys = env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")
    special = any(_true(n, env) for n in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"))
    proxied = any(env.get(n) for n in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"))
    if not (inside and keys and region) or special or proxied:
        return None
    endpoint = None
    if not _true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", env):  # as boto3 resolves it
        endpoint = env.get(f"AWS_ENDPOINT_URL_{env_name}") or env.get("AWS_ENDPOINT_URL")
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"

    def credentials() -> Credentials:  # read at each call, as Lambda set them
        return Credentials(
            env["AWS_ACCESS_KEY_ID"],
            env["AWS_SECRET_ACCESS_KEY"],
            env.get("AWS_SESSION_TOKEN") or None,
        )

    return LambdaTarget(
        (endpoint or f"https://{service}.{region}.{suffix}").rstrip("/"),
        region,
        credentials,
        lambda: env.get("_X_AMZN_TRACE_ID"),
        env.get("AWS_CA_BUNDLE") or None,
    )


def _error(
    operation: str,
    status: int,
    headers: http.client.HTTPMessage,
    body: bytes,
    token: str | None = None,
) -> AwsCallError:
    """AWS's code from x-amzn-ErrorType ("Code:details") or the body's __type/code; its
    message without the session token (`token`, and any value quoted as that header's):
    the message reaches the worker's failed invocation and the kicks' and bookings' logs,
    and the token signs for the function's role for hours."""
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        parsed = {}
    parsed = parsed if isinstance(parsed, dict) else {}
    code = (headers.get("x-amzn-ErrorType") or "").split(":")[0]
    code = code or str(parsed.get("__type") or parsed.get("code") or "").split("#")[-1]
    message = str(
        parsed.get("Message") or parsed.get("message") or body[:200].decode(errors="replace")
    )
    message = without_session_token(message, token or "")
    return AwsCallError(operation, code or f"HTTP{status}", message, status)


def _pause(failure: AwsCallError) -> float | None:
    """The ceiling of botocore's random pause before AWS's `failure` is retried; None: it
    is not. (A connection that failed is tried again at once: usually a kept-alive one
    gone stale across a freeze, which urllib3, under botocore, replaces without a retry.)"""
    if failure.code in THROTTLING_CODES or failure.status == 429:
        return THROTTLED_PAUSE
    transient = failure.code in TRANSIENT_CODES or failure.status in TRANSIENT_STATUS
    return TRANSIENT_PAUSE if transient else None


class SignedHttp:
    """One service's signed JSON calls, on kept-alive connections shared by threads."""

    def __init__(
        self,
        service: str,
        target: LambdaTarget,
        *,
        timeout: float = 2.0,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """sleep, rand: the pause before a retry (tests pass their own)."""
        parts = urlsplit(target.endpoint)
        self.https = parts.scheme == "https"
        self.netloc, self.base = parts.netloc, parts.path.rstrip("/")
        self.service, self.target, self.timeout, self.now = service, target, timeout, now
        self.sleep, self.rand = sleep, rand
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()  # the wake-up thread and the worker share them
        self._tls: ssl.SSLContext | None = None  # made once: loading certificates costs

    def call(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """The answer's status (2xx) and JSON object, retried as botocore retries it;
        AwsCallError for AWS's refusal, AwsUnavailable when unreached (or not AWS's answer)."""
        last: Exception | None = None
        for _ in range(ATTEMPTS):
            if isinstance(last, AwsCallError):
                self.sleep(self.rand() * (_pause(last) or 0.0))
            try:
                status, answered, answer = self._send(
                    method, self.base + path, query or {}, body, headers or {}
                )
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
                last = exc
                self.close()  # kept alive across a freeze, the others are stale too
                continue
            if 200 <= status < 300:
                try:
                    parsed = json.loads(answer or b"{}")
                except ValueError:  # answered, so not sent again: it may have been done
                    what = f"answered {status} with a body that is not JSON"
                    raise self._unreached(operation, what) from None
                return status, parsed if isinstance(parsed, dict) else {}
            last = _error(operation, status, answered, answer, self.target.credentials().token)
            if _pause(last) is None:
                raise last
        if isinstance(last, AwsCallError):
            raise last
        assert last is not None
        what = f"could not be reached ({type(last).__name__}: {last})"
        raise self._unreached(operation, what) from last

    def _unreached(self, operation: str, what: str) -> AwsUnavailable:
        """What to check when `operation` got no answer from AWS (never a header's value:
        the session token and the signature stay out of messages and logs)."""
        host = self.netloc.rpartition("@")[2]  # never an endpoint's user:password
        where = f"{'https' if self.https else 'http'}://{host}{self.base}"
        return AwsUnavailable(
            f"{operation}: AWS {self.service} at {where} {what}: "
            f"check the network (a function in a VPC needs a NAT gateway or an interface "
            f"endpoint for {self.service}), or the AWS_ENDPOINT_URL_* variable if one is set"
        )

    def _send(
        self, method: str, path: str, query: dict[str, str], body: bytes, headers: dict[str, str]
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        sent = sign(
            self.target.credentials(),
            region=self.target.region,
            service=self.service,
            method=method,
            host=self.netloc,
            path=path,
            query=query,
            headers=headers,
            body=body,
            now=self.now(),
        )
        sent["User-Agent"] = "pgkick"
        trace = self.target.trace_id()
        if trace:
            sent["X-Amzn-Trace-Id"] = trace  # unsigned, as botocore leaves it
        url = path + ("?" + canonical_query(query) if query else "")
        connection = self._connection()
        try:
            connection.request(method, url, body=body or None, headers=sent)
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
        if not self.https:
            return http.client.HTTPConnection(self.netloc, timeout=self.timeout)
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=self.target.ca_bundle)
        return http.client.HTTPSConnection(self.netloc, timeout=self.timeout, context=self._tls)

    def close(self) -> None:
        """Close the kept-alive connections (a worker keeps them for its environment's life;
        a failed call drops them, as stale; tests close theirs)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for stale in idle:
            stale.close()


class SignedClient:
    """What the service clients (pgkick.awsapi.scheduler, .secrets, .lambda_invoke) share:
    one SignedHttp, made for a Lambda runtime's environment, closed with the client."""

    SERVICE: ClassVar[str]  # the signing name, and the endpoint's first label
    ENV_NAME: ClassVar[str]  # boto3's endpoint variable: AWS_ENDPOINT_URL_<ENV_NAME>

    def __init__(self, http: SignedHttp) -> None:
        self.http = http

    @classmethod
    def available(cls, timeout: float, env: Mapping[str, str] | None = None) -> Self | None:
        """The client for a Lambda runtime's environment; None outside one (use boto3)."""
        target = lambda_target(cls.SERVICE, cls.ENV_NAME, env)
        return cls(SignedHttp(cls.SERVICE, target, timeout=timeout)) if target else None

    def close(self) -> None:
        self.http.close()
