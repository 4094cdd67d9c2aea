"""The database secret: Secrets Manager's GetSecretValue, signed inside Lambda, else boto3.

Why not Powertools' parameters utility, as before: it imports boto3 and makes a client
before the first claim of every cold start (pgkick.awsapi.signed_http: what that cost).
Inside a Lambda runtime (signed_http says when) the read is one signed JSON call; anywhere
else (an operator's CLI, an app, SnapStart) a boto3 client with pgkick's timeouts. Either
way the text is cached per secret for `max_age` seconds, as Powertools cached it, and
`fresh` reads it again (after a password rotation the cached one fails to authenticate).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from pgkick.awsapi.boto import aws_client
from pgkick.awsapi.signed_http import SignedHttp, lambda_target

_lock = threading.Lock()
_cache: dict[str, tuple[float, str]] = {}  # secret id -> (read at, monotonic; its text)
_clients: dict[str, Any] = {}  # endpoint (or "boto3") -> its client, kept between reads


def read(
    secret_id: str,
    *,
    max_age: float = 300.0,
    fresh: bool = False,
    timeout: float = 5.0,
    env: Mapping[str, str] | None = None,
) -> str:
    """The secret's text (SecretString, or SecretBinary decoded as UTF-8). Raises what AWS
    answered (AwsCallError inside Lambda, botocore's errors elsewhere)."""
    with _lock:
        cached = _cache.get(secret_id)
        if cached and not fresh and time.monotonic() - cached[0] < max_age:
            return cached[1]
    answer = _get_secret_value(secret_id, timeout, env)
    if "SecretString" in answer:
        text = str(answer["SecretString"])
    else:
        binary = answer.get("SecretBinary", b"")  # boto3 decodes the blob, JSON carries base64
        text = (binary if isinstance(binary, bytes) else base64.b64decode(binary)).decode()
    with _lock:
        _cache[secret_id] = (time.monotonic(), text)
    return text


def _get_secret_value(
    secret_id: str, timeout: float, env: Mapping[str, str] | None
) -> dict[str, Any]:
    target = lambda_target("secretsmanager", "SECRETS_MANAGER", env)
    with _lock:
        key = target.endpoint if target else "boto3"
        client = _clients.get(key)
        if client is None:
            if target is None:
                client = aws_client("secretsmanager", timeout)
            else:
                client = SignedHttp("secretsmanager", target, timeout=timeout)
            _clients[key] = client
    if isinstance(client, SignedHttp):
        return client.call(
            "GetSecretValue",
            "POST",
            "/",
            body=json.dumps({"SecretId": secret_id}).encode(),
            headers={
                "Content-Type": "application/x-amz-json-1.1",
                "X-Amz-Target": "secretsmanager.GetSecretValue",
            },
        )
    return dict(client.get_secret_value(SecretId=secret_id))
