"""The dev server checks AWS signatures as AWS does (pgkick_dev.devserver.signatures): the
worker signs its Scheduler calls itself inside Lambda, and a stand-in that took anything
would let a broken signer pass every local test and fail on AWS's first call."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pgkick.awsapi.signature import Credentials, sign
from tests.devserver_fixtures import FUNCTION, dev_stack

INVOKE = f"/2015-03-31/functions/{FUNCTION}/invocations"


def send(url: str, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    """(status, x-amzn-ErrorType) of one raw request."""
    request = urllib.request.Request(url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, str(exc.headers.get("x-amzn-ErrorType", ""))


def signed(
    url: str, service: str, method: str, path: str, body: bytes, key: str = "dev"
) -> dict[str, str]:
    return sign(
        Credentials(key, "dev"),
        region="us-east-1",
        service=service,
        method=method,
        host=urlsplit(url).netloc,
        path=path,
        query={},
        headers={"Content-Type": "application/json"},
        body=body,
        now=datetime.now(UTC),
    )


def boto(service: str, url: str, key: str, secret: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        config=Config(retries={"total_max_attempts": 1}),
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )


def test_unsigned_and_misscoped_requests_are_refused_as_aws_refuses_them() -> None:
    """Catches a stand-in that takes a request AWS would refuse: no signature, a signature
    for another service, for another path, a body changed after signing."""
    body = json.dumps({"ScheduleExpression": "at(2027-01-15T08:05:00)"}).encode()
    with dev_stack() as dev:
        path = "/schedules/pgkick-x"
        assert send(dev.url, "POST", path, body, {}) == (403, "MissingAuthenticationTokenException")
        assert send(dev.url, "POST", INVOKE, b"{}", {}) == (
            403,
            "MissingAuthenticationTokenException",
        )
        wrong_service = signed(dev.url, "lambda", "POST", path, body)
        assert send(dev.url, "POST", path, body, wrong_service) == (
            403,
            "InvalidSignatureException",
        )
        tampered = signed(dev.url, "scheduler", "POST", path, body)
        assert send(dev.url, "POST", path, body + b" ", tampered) == (
            403,
            "InvalidSignatureException",
        )
        elsewhere = signed(dev.url, "lambda", "POST", INVOKE.replace(FUNCTION, "other"), b"{}")
        assert send(dev.url, "POST", INVOKE, b"{}", elsewhere) == (403, "InvalidSignatureException")
        assert dev.kinds() == []  # nothing refused reached the queue
        good = signed(dev.url, "lambda", "POST", INVOKE, b"{}")
        assert send(dev.url, "POST", INVOKE, b"{}", good)[0] == 200  # run: the echo answered


@pytest.mark.parametrize("service", ["lambda", "scheduler"])
def test_a_known_key_with_the_wrong_secret_is_refused_an_unknown_key_is_not_checked(
    service: str,
) -> None:
    """boto3's own requests: the stack's known dev key signed with another secret is
    refused (InvalidSignatureException), as AWS refuses it; a key the stack does not know
    is taken unchecked (an app's own credentials)."""
    with dev_stack() as dev:
        for key, secret, refused in (("dev", "not-dev", True), ("AKIAUNKNOWN", "x", False)):
            client = boto(service, dev.url, key, secret)
            try:
                if service == "lambda":
                    client.invoke(FunctionName=FUNCTION, InvocationType="DryRun")
                else:
                    client.list_schedules()
                error = None
            except ClientError as exc:
                error = exc.response["Error"]["Code"]
            assert error == ("InvalidSignatureException" if refused else None)
