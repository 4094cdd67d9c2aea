"""A worker's AWS calls inside Lambda without boto3 (pgkick.awsapi.signed_http, issue #32: the
first batch waited 0.4 s for boto3 to book its rescue, the cold start for it to read the
database secret, a fan-out's batch for its kick).

- the signature is AWS's: AWS's published example, and botocore's SigV4Auth recomputed
  over the very bytes each call sent (a recording HTTP server); an Invoke is sent as
  botocore's serializer makes it;
- AWS's refusals reach the kicker as botocore's do (error_code), against the dev stack's
  Scheduler and Lambda APIs: a rescue booked twice is fine, a cancel of a fired one is
  fine, a kick lands in the function's queue, a kick of no function is refused;
- a dropped connection, a 5xx or a throttle is tried once more after botocore's pause,
  another 4xx is not;
- the secret is cached as Powertools caches it, and read again when asked;
- used only inside a Lambda runtime, and there a worker's secret, rescue and kicks import
  no botocore.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pgkick.awsapi import secrets
from pgkick.awsapi.lambda_invoke import InvokeClient
from pgkick.awsapi.scheduler import SchedulerClient
from pgkick.awsapi.secrets import SecretsClient
from pgkick.awsapi.signature import Credentials, sign
from pgkick.awsapi.signed_http import LambdaTarget, SignedHttp
from pgkick.errors import AwsCallError, AwsUnavailable, InvalidArgument
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.kick.throttle import error_code
from tests.devserver_fixtures import FUNCTION, dev_stack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOW = datetime(2026, 12, 3, 6, 30, 5, tzinfo=UTC)
CREDENTIALS = Credentials("AKIDPGKICK", "secret/with+chars", "session-token==")
ARN = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
ROLE = "arn:aws:iam::123456789012:role/pgkick-scheduler"


@pytest.fixture(autouse=True)
def fresh_secrets() -> Iterator[None]:
    """Each test reads its secrets anew, and its clients' connections are closed after."""
    secrets.forget()
    yield
    secrets.forget()


def test_aws_published_example_is_signed_as_aws_signs_it() -> None:
    """AWS's Signature V4 test suite, `get-vanilla`. Catches a wrong key derivation,
    canonical form or string to sign."""
    headers = sign(
        Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        region="us-east-1",
        service="service",
        method="GET",
        host="example.amazonaws.com",
        path="/",
        query={},
        headers={},
        body=b"",
        now=datetime(2015, 8, 30, 12, 36, 0, tzinfo=UTC),
    )
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


class Recorder:
    """A real HTTP server that records each request and answers from a script: (status,
    body) or "drop" (the connection closed without an answer)."""

    def __init__(self, script: list[Any]) -> None:
        self.script, self.seen = list(script), []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                recorder.seen.append((self.command, self.path, dict(self.headers), body))
                answer = recorder.script.pop(0) if recorder.script else (200, {})
                if answer == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                status, payload = answer
                raw = isinstance(payload, bytes)  # a proxy's page, not AWS's JSON
                data = payload if raw else json.dumps(payload).encode()
                self.send_response(status)
                if status >= 400 and not raw:
                    self.send_header("x-amzn-ErrorType", payload.get("type", "") + ":http://x")
                self.send_header("Content-Type", "text/html" if raw else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def recording(script: list[Any], tls: tuple[str, str] | None = None) -> Iterator[Recorder]:
    """tls: (certificate, key) files: the server speaks HTTPS with them."""
    recorder = Recorder(script)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server = recorder.server
        server.socket = context.wrap_socket(server.socket, server_side=True)
        recorder.url = recorder.url.replace("http://", "https://")
    thread = threading.Thread(target=recorder.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        recorder.server.shutdown()
        recorder.server.server_close()


def http_for(url: str, service: str = "scheduler", pauses: list[float] | None = None) -> SignedHttp:
    """pauses: where the pauses before retries go (slept by nobody), rand() being 0.5."""
    target = LambdaTarget(url, "eu-west-3", lambda: CREDENTIALS, lambda: "Root=1-a-b")
    slept = pauses if pauses is not None else []
    return SignedHttp(
        service, target, timeout=2.0, now=lambda: NOW, sleep=slept.append, rand=lambda: 0.5
    )


def client_for(url: str, pauses: list[float] | None = None) -> SchedulerClient:
    return SchedulerClient(http_for(url, pauses=pauses))


def botocore_authorization(
    service: str, method: str, url: str, headers: dict[str, str], body: bytes
) -> str:
    """What botocore's own signer makes of the request as it arrived."""
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    added = ("authorization", "x-amz-date", "x-amz-security-token")  # the signer adds them
    sent_by_http = ("content-length", "accept-encoding", "user-agent", "x-amzn-trace-id")
    kept = {k: v for k, v in headers.items() if k.lower() not in added + sent_by_http}
    request = AWSRequest(method=method, url=url, data=body, headers=kept)
    auth = botocore.auth.SigV4Auth(
        BotoCredentials(CREDENTIALS.access_key, CREDENTIALS.secret_key, CREDENTIALS.token),
        service,
        "eu-west-3",
    )
    original = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda: NOW.replace(tzinfo=None)  # type: ignore[attr-defined]
    try:
        auth.add_auth(request)
    finally:
        botocore.auth.get_current_datetime = original  # type: ignore[attr-defined]
    return str(request.headers["Authorization"])


def botocore_request(service: str, operation: str, **params: Any) -> dict[str, Any]:
    """The request botocore's own serializer makes of `operation` (path, headers, body)."""
    import botocore.serialize
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    serializer = botocore.serialize.create_serializer(model.metadata["protocol"])
    request: dict[str, Any] = serializer.serialize_to_request(
        params, model.operation_model(operation)
    )
    return request


def test_the_requests_sent_are_signed_as_botocore_signs_them() -> None:
    """The three calls, as they arrived on the wire, re-signed by botocore: the same
    Authorization. Catches a header sent but not signed (or the reverse), a path or query
    encoded otherwise, a body hashed other than sent, a session token left out."""
    secret = (200, {"SecretString": "{}"})
    script = [(200, {"ScheduleArn": "arn:x"}), (200, {}), secret, (202, {})]
    with recording(script) as server:
        client = client_for(server.url)
        answer = client.create_schedule(
            Name="pgkick-rescue-q.1_x",
            GroupName="default",
            ScheduleExpression="at(2026-12-03T06:32:00)",
            Target={"Arn": ARN, "RoleArn": ROLE, "Input": '{"queue": "a b"}'},
        )
        client.delete_schedule(Name="pgkick-rescue-q.1_x", GroupName="my group")
        reader = SecretsClient(http_for(server.url, "secretsmanager"))
        read = reader.get_secret_value(SecretId="pgkick/db")
        invoker = InvokeClient(http_for(server.url, "lambda"))
        kicked = invoker.invoke(FunctionName=ARN, InvocationType="Event", Payload=b'{"q": 1}')
        client.close()
        reader.close()
        invoker.close()
    assert answer == {"ScheduleArn": "arn:x"} and read == {"SecretString": "{}"}
    assert kicked == {"StatusCode": 202}
    (post, path, headers, body), (delete, dpath, dheaders, dbody), third, fourth = server.seen
    assert (post, path, delete) == ("POST", "/schedules/pgkick-rescue-q.1_x", "DELETE")
    assert json.loads(body)["ClientToken"] and json.loads(body)["GroupName"] == "default"
    assert "Name" not in json.loads(body)  # it travels in the path
    assert dpath.startswith("/schedules/pgkick-rescue-q.1_x?clientToken=")
    assert "groupName=my%20group" in dpath and dbody == b""
    assert headers["X-Amz-Security-Token"] == CREDENTIALS.token
    assert headers["X-Amzn-Trace-Id"] == "Root=1-a-b"  # Lambda's loop detection reads it
    calls = [
        ("scheduler", post, path, headers, body),
        ("scheduler", delete, dpath, dheaders, dbody),
    ]
    invoke = botocore_request("lambda", "Invoke", FunctionName=ARN, InvocationType="Event")
    assert fourth[:2] == ("POST", invoke["url_path"]) and fourth[3] == b'{"q": 1}'
    assert fourth[2]["X-Amz-Invocation-Type"] == invoke["headers"]["X-Amz-Invocation-Type"]
    calls += [("secretsmanager", *third), ("lambda", *fourth)]
    for service, method, sent, hdrs, data in calls:
        expected = botocore_authorization(service, method, server.url + sent, hdrs, data)
        assert hdrs["Authorization"] == expected
        assert f"/eu-west-3/{service}/aws4_request" in expected


def test_refusals_read_as_botocore_reads_them_and_only_failures_are_retried() -> None:
    """A dropped connection (at once) and a 503 (after botocore's pause) are tried once more
    (the same ClientToken, so AWS makes one schedule); a 409 is not tried again and names
    its code; two failures raise; an answer that is not AWS's (no code, no JSON) is named by
    its status and text. Catches a retry that re-creates, a retried refusal, a swallowed
    error, a stale kept-alive connection made to wait."""
    conflict = (409, {"type": "ConflictException", "Message": "exists"})
    unavailable = (503, {"type": "ServiceUnavailableException", "Message": "later"})
    page = (403, b"<html>\xff denied by proxy</html>")
    script = ["drop", (200, {"ScheduleArn": "a"}), conflict, unavailable, unavailable, page]
    pauses: list[float] = []
    with recording(script) as s:
        client = client_for(s.url, pauses)
        assert client.create_schedule(Name="n", GroupName="g") == {"ScheduleArn": "a"}
        tokens = {json.loads(body)["ClientToken"] for _, _, _, body in s.seen}
        assert len(s.seen) == 2 and len(tokens) == 1
        with pytest.raises(AwsCallError) as refused:
            client.create_schedule(Name="n", GroupName="g")
        assert error_code(refused.value) == "ConflictException" and len(s.seen) == 3
        with pytest.raises(AwsCallError) as failed:
            client.delete_schedule(Name="n")
        assert error_code(failed.value) == "ServiceUnavailableException" and len(s.seen) == 5
        with pytest.raises(AwsCallError) as foreign:
            client.delete_schedule(Name="n")
        assert error_code(foreign.value) == "HTTP403" and "denied by proxy" in str(foreign.value)
        client.close()
    assert pauses == [0.025]  # the 503's, rand() x 50 ms; a dropped connection: at once


def test_an_endpoint_out_of_reach_is_named_in_a_pgkick_error_after_the_retry() -> None:
    """A port nobody listens on, tried twice, and a 2xx whose body is not JSON (a proxy's
    page) raise AwsUnavailable naming the call, the endpoint and the cause, never the raw
    ConnectionRefusedError or JSONDecodeError, nor the session token. Catches the raw
    OSError a worker's secret read raised ("[Errno 111] Connection refused", nothing
    saying what was called where)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # bound, then closed: the port refuses
    secrets_url = f"http://127.0.0.1:{port}"
    with pytest.raises(AwsUnavailable) as refused:
        secrets.read("pgkick/db", env=lambda_env(secrets_url) | {"AWS_SESSION_TOKEN": "tok-9"})
    message = str(refused.value)
    assert "GetSecretValue" in message and secrets_url in message and "refused" in message
    assert "secretsmanager" in message and "tok-9" not in message
    assert isinstance(refused.value.__cause__, ConnectionRefusedError)
    with recording([(200, b"<html>portal</html>")]) as server:
        client = client_for(server.url)
        with pytest.raises(AwsUnavailable, match=r"CreateSchedule: .* answered 200 with a body"):
            client.create_schedule(Name="n", GroupName="g")
        client.close()
    assert len(server.seen) == 1  # a 2xx is answered: not sent again


def test_a_refusal_quoting_the_canonical_request_keeps_the_session_token_out() -> None:
    """AWS refuses a signature it cannot match by quoting the canonical request it expected,
    every signed header's value with it, the session token's too (its InvalidSignature
    answers: aws/aws-sdk-js#168, aws/aws-sdk-cpp#17). The AwsCallError keeps AWS's code and
    message without the token, wherever AWS put it. Catches the token copied into the
    message a worker's failed invocation, a kick's warning and the booking thread log."""
    token = CREDENTIALS.token
    assert token
    quoted = (
        "The request signature we calculated does not match the signature you provided.\n\n"
        "The Canonical String for this request should have been\n'POST\n/2015-03-31/"
        f"functions/w/invocations\n\nhost:127.0.0.1\nx-amz-security-token:{token}\n"
        f"x-amz-date:20261203T063005Z\n\nhost;x-amz-date;x-amz-security-token\n'"
        f" (token {token})"
    )
    refusal = (403, {"type": "InvalidSignatureException", "Message": quoted})
    with recording([refusal]) as server:
        invoker = InvokeClient(http_for(server.url, "lambda"))
        with pytest.raises(AwsCallError) as refused:
            invoker.invoke(FunctionName="w", Payload=b"{}")
        invoker.close()
    said = str(refused.value) + repr(refused.value.response)
    assert server.seen[0][2]["X-Amz-Security-Token"] == token  # sent, then refused
    assert token not in said and "x-amz-security-token:<redacted>" in said
    assert error_code(refused.value) == "InvalidSignatureException"
    assert "Canonical String for this request" in said  # the rest of AWS's help stays


def test_a_throttled_kick_is_sent_again_after_botocores_pause_once() -> None:
    """Lambda's 429 TooManyRequestsException (and Scheduler's ThrottlingException, a 400) is
    retried once after rand() x 1 s, as boto3's client did for the kicker; a second throttle
    is raised with its code (the kicker's caller books a wake-up instead). Catches a throttle
    raised at once, retried without a pause, or retried for ever."""
    throttled = (429, {"type": "TooManyRequestsException", "Message": "Rate Exceeded."})
    slow = (400, {"type": "ThrottlingException", "Message": "slow down"})
    invalid = (400, {"type": "ValidationException", "Message": "bad"})
    pauses: list[float] = []
    with recording([throttled, (202, {}), throttled, throttled, slow, (200, {}), invalid]) as s:
        invoker = InvokeClient(http_for(s.url, "lambda", pauses))
        assert invoker.invoke(FunctionName="w", Payload=b"{}") == {"StatusCode": 202}
        with pytest.raises(AwsCallError) as twice:
            invoker.invoke(FunctionName="w", Payload=b"{}")
        assert error_code(twice.value) == "TooManyRequestsException" and len(s.seen) == 4
        scheduler = client_for(s.url, pauses)
        assert scheduler.create_schedule(Name="n", GroupName="g") == {}
        with pytest.raises(AwsCallError):
            scheduler.create_schedule(Name="n", GroupName="g")
        invoker.close()
        scheduler.close()
    assert len(s.seen) == 7 and pauses == [0.5, 0.5, 0.5]
    with pytest.raises(InvalidArgument, match="asynchronous invokes only"):
        invoker.invoke(FunctionName="w", InvocationType="RequestResponse")


def test_the_kicker_books_and_cancels_rescues_against_the_dev_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside a Lambda runtime's environment the kicker takes these clients: the dev stack's
    Lambda API (signature checked) queues the kick, and refuses one of an unknown function;
    its Scheduler (AWS's REST-JSON answers) sees the schedule made, made again
    (Conflict: fine), deleted, and deleted again (NotFound: fine)."""
    with dev_stack() as dev:
        for name, value in {
            "AWS_LAMBDA_FUNCTION_NAME": FUNCTION,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "pgkick-dev",
            "AWS_SECRET_ACCESS_KEY": "pgkick-dev",
            "AWS_ENDPOINT_URL_SCHEDULER": dev.url,
            "AWS_ENDPOINT_URL_LAMBDA": dev.url,
        }.items():
            monkeypatch.setenv(name, value)
        kicker = LambdaKicker(FUNCTION, function_arn=ARN, scheduler_role_arn=ROLE)
        kicker.kick("q-signed", "manual", hop=2)  # by ARN, as a template may name it
        assert isinstance(kicker._lambda, InvokeClient)
        dev.wait(lambda: [e for e in dev.events("kick") if e["queue"] == "q-signed"] != [])
        nobody = LambdaKicker("no-such-function")
        with pytest.raises(AwsCallError) as missing:
            nobody.kick("q", "manual")
        assert error_code(missing.value) == "ResourceNotFoundException"
        nobody._lambda.close()
        when = datetime.fromtimestamp(dev.clock.now(), UTC) + timedelta(minutes=5)
        kicker.book_rescue("q", when, "pgkick-rescue-test")
        kicker.book_rescue("q", when, "pgkick-rescue-test")  # booked already: no error
        assert isinstance(kicker._scheduler, SchedulerClient)
        made = dev.scheduler.get_schedule(Name="pgkick-rescue-test", GroupName="default")
        assert made["Target"]["Arn"] == ARN and json.loads(made["Target"]["Input"])["queue"] == "q"
        kicker.cancel_rescue("pgkick-rescue-test")
        kicker.cancel_rescue("pgkick-rescue-test")  # gone already: no error
        names = [s["Name"] for s in dev.scheduler.list_schedules()["Schedules"]]
        assert "pgkick-rescue-test" not in names
        kicker._scheduler.close()
        kicker._lambda.close()


def test_only_inside_a_lambda_runtime_with_its_credentials() -> None:
    """Anywhere else boto3 keeps its whole credential chain and endpoint rules."""
    lam = {
        "AWS_LAMBDA_FUNCTION_NAME": "w",
        "AWS_REGION": "eu-west-3",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    found = SchedulerClient.available(1.0, lam)
    assert found is not None and found.http.netloc == "scheduler.eu-west-3.amazonaws.com"
    assert found.http.https
    china = SchedulerClient.available(1.0, lam | {"AWS_REGION": "cn-north-1"})
    assert china is not None and china.http.netloc == "scheduler.cn-north-1.amazonaws.com.cn"
    no_region = {k: v for k, v in lam.items() if k != "AWS_REGION"}
    default = SchedulerClient.available(1.0, no_region | {"AWS_DEFAULT_REGION": "us-west-2"})
    assert default is not None and default.http.target.region == "us-west-2"
    for missing in ("AWS_LAMBDA_FUNCTION_NAME", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert (
            SchedulerClient.available(1.0, {k: v for k, v in lam.items() if k != missing}) is None
        )
    assert SchedulerClient.available(1.0, no_region) is None
    assert SchedulerClient.available(1.0, lam | {"AWS_USE_FIPS_ENDPOINT": "true"}) is None
    assert SchedulerClient.available(1.0, lam | {"HTTPS_PROXY": "http://proxy:3128"}) is None


def test_https_verifies_the_certificate_and_honours_aws_ca_bundle(tmp_path: Path) -> None:
    """AWS's endpoints are HTTPS: a certificate nobody vouches for is refused (after the
    second attempt), and one in AWS_CA_BUNDLE is trusted, as boto3 does. Catches an
    unverified TLS connection, or AWS_CA_BUNDLE ignored."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    with recording([(200, {"ScheduleArn": "a"})], tls=(str(cert), str(key))) as server:
        env = lambda_env(server.url)
        untrusted = SchedulerClient.available(1.0, env)
        assert untrusted is not None
        with pytest.raises(AwsUnavailable, match="CERTIFICATE_VERIFY_FAILED") as refused:
            untrusted.create_schedule(Name="n", GroupName="g")
        assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)
        trusted = SchedulerClient.available(1.0, env | {"AWS_CA_BUNDLE": str(cert)})
        assert trusted is not None
        assert trusted.create_schedule(Name="n", GroupName="g") == {"ScheduleArn": "a"}
        untrusted.close()
        trusted.close()
    assert len(server.seen) == 1


def lambda_env(url: str) -> dict[str, str]:
    """What a Lambda runtime puts in the environment (its endpoints pointed at `url`)."""
    return {
        "AWS_LAMBDA_FUNCTION_NAME": "w",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ENDPOINT_URL_SCHEDULER": url,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": url,
        "AWS_ENDPOINT_URL_LAMBDA": url,
    }


def test_the_secret_is_cached_read_again_when_asked_and_refusals_named() -> None:
    """Powertools' caching kept: a second read within max_age sends nothing, `fresh`
    reads again (a rotated password), a binary secret is decoded; AWS's refusal names its
    code."""
    binary = base64.b64encode(b'{"host": "b"}').decode()
    missing = (400, {"type": "ResourceNotFoundException", "Message": "no such secret"})
    script = [(200, {"SecretString": "one"}), (200, {"SecretString": "two"})]
    with recording([*script, (200, {"SecretBinary": binary}), missing]) as server:
        env = lambda_env(server.url)
        name = f"pgkick/{uuid.uuid4()}"
        assert secrets.read(name, env=env) == "one"
        assert secrets.read(name, env=env) == "one" and len(server.seen) == 1
        assert secrets.read(name, env=env, fresh=True) == "two"
        assert secrets.read(name + "-bin", env=env) == '{"host": "b"}'
        with pytest.raises(AwsCallError) as refused:
            secrets.read(name + "-gone", env=env)
        assert error_code(refused.value) == "ResourceNotFoundException"
        assert [json.loads(b)["SecretId"] for *_, b in server.seen][-1] == name + "-gone"
        assert server.seen[0][2]["X-Amz-Target"] == "secretsmanager.GetSecretValue"


def test_outside_lambda_the_secret_is_read_through_boto3(aws: None) -> None:
    """An operator's CLI or an app (no Lambda runtime): boto3, with its credential chain
    (moto here), string and binary secrets alike, cached the same way."""
    import boto3

    client = boto3.client("secretsmanager")
    text = client.create_secret(Name=f"s-{uuid.uuid4()}", SecretString="postgresql://a/b")
    blob = client.create_secret(Name=f"b-{uuid.uuid4()}", SecretBinary=b'{"url": "x"}')
    assert secrets.read(text["ARN"]) == "postgresql://a/b"
    client.put_secret_value(SecretId=text["ARN"], SecretString="postgresql://rotated/b")
    assert secrets.read(text["ARN"]) == "postgresql://a/b"  # cached
    assert secrets.read(text["ARN"], fresh=True) == "postgresql://rotated/b"
    assert secrets.read(blob["ARN"]) == '{"url": "x"}'


def test_a_worker_reading_its_secret_kicking_and_booking_its_rescue_imports_no_botocore() -> None:
    """The point of it: in a Lambda runtime's environment, the DSN read from the secret
    (as the deployed worker reads it), a kick, and the rescue's booking and cancel (against
    a real server) leave botocore unimported. Catches a fallback to boto3 or Powertools
    there."""
    code = (
        "import os, sys\n"
        "from datetime import UTC, datetime\n"
        "from pgkick.config.app import AppSettings\n"
        "from pgkick.kick.lambda_kicker import LambdaKicker\n"
        "print(AppSettings.from_env(os.environ).dsn())\n"
        f"k = LambdaKicker('w', function_arn={ARN!r}, scheduler_role_arn={ROLE!r})\n"
        "k.kick('q', 'fanout', hop=1)\n"
        "k.book_rescue('q', datetime.now(UTC), 'pgkick-rescue-x')\n"
        "k.cancel_rescue('pgkick-rescue-x')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('botocore', 'boto3')))\n"
    )
    secret = {"username": "u", "password": "p", "host": "db.example", "port": 5432, "dbname": "d"}
    script = [(200, {"SecretString": json.dumps(secret)}), (202, {})]
    script += [(200, {"ScheduleArn": "a"}), (200, {})]
    with recording(script) as server:
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | lambda_env(server.url)
        env |= {
            "PGKICK_DATABASE_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:db",
            "PYTHONPATH": os.path.join(ROOT, "functions"),
        }
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
    assert [m for m, *_ in server.seen] == ["POST", "POST", "POST", "DELETE"]
    assert server.seen[1][1] == "/2015-03-31/functions/w/invocations"
    assert json.loads(server.seen[1][3]) | {"hop": 1} == json.loads(server.seen[1][3])
    dsn, modules = done.stdout.strip().splitlines()
    assert "host=db.example" in dsn or "@db.example" in dsn, dsn
    assert modules == "[]", done.stdout + done.stderr
