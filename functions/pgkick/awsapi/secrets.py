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
from pgkick.awsapi.signed_http import SignedClient, SignedHttp, lambda_target
from pgkick.errors import ConfigError

_lock = threading.Lock()
_cache: dict[str, tuple[float, str]] = {}  # secret id -> (read at, monotonic; its text)
_clients: dict[str, Any] = {}  # endpoint (or "boto3") -> its client, kept between reads


class SecretsClient(SignedClient):
    """get_secret_value as boto3's client takes and answers it (SecretBinary as bytes)."""

    SERVICE, ENV_NAME = "secretsmanager", "SECRETS_MANAGER"

    def get_secret_value(self, *, SecretId: str) -> dict[str, Any]:
        _, answer = self.http.call(
            "GetSecretValue",
            "POST",
            "/",
            body=json.dumps({"SecretId": SecretId}).encode(),
            headers={
                "Content-Type": "application/x-amz-json-1.1",
                "X-Amz-Target": "secretsmanager.GetSecretValue",
            },
        )
        if "SecretBinary" in answer:  # the JSON carries it in base64; boto3 decodes it
            answer["SecretBinary"] = base64.b64decode(answer["SecretBinary"])
        return answer


def read(
    secret_id: str,
    *,
    max_age: float = 300.0,
    fresh: bool = False,
    timeout: float = 5.0,
    env: Mapping[str, str] | None = None,
) -> str:
    """The secret's text (SecretString, or SecretBinary decoded as UTF-8). Raises what AWS
    answered (AwsCallError inside Lambda, botocore's errors elsewhere), or, inside Lambda,
    AwsUnavailable when Secrets Manager could not be reached."""
    with _lock:
        cached = _cache.get(secret_id)
        if cached and not fresh and time.monotonic() - cached[0] < max_age:
            return cached[1]
        target = lambda_target(SecretsClient.SERVICE, SecretsClient.ENV_NAME, env)
        key = target.endpoint if target else "boto3"
        client = _clients.get(key)
        if client is None:
            if target is None:
                client = aws_client("secretsmanager", timeout)
            else:
                client = SecretsClient(SignedHttp(SecretsClient.SERVICE, target, timeout=timeout))
            _clients[key] = client
    answer = client.get_secret_value(SecretId=secret_id)
    try:
        text = (
            answer["SecretString"] if "SecretString" in answer else answer["SecretBinary"].decode()
        )
    except UnicodeDecodeError:  # its message holds none of the bytes; its object does: dropped
        raise ConfigError(
            f"secret {secret_id}: its SecretBinary is not UTF-8 text; store the DSN or the "
            "JSON as the secret's string (SecretString)"
        ) from None
    with _lock:
        _cache[secret_id] = (time.monotonic(), str(text))
    return str(text)


def forget() -> None:
    """Drop the cached secrets and clients, closing their connections (tests; a process
    that wants the next read to go to AWS)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
        _cache.clear()
    for client in clients:
        client.close()  # boto3's clients close their connection pools too
