"""The database secret, read inside Lambda without boto3 (Secrets Manager's GetSecretValue).

Why: the deployed worker reads its DSN from a secret at its cold start, before it connects.
Through Powertools' parameters utility that imported boto3 and made a client first, on every
cold start's commit to claim (pgkick.awsapi.signed_http: what it cost). Inside a Lambda
runtime (pgkick.awsapi.signed_http says when) it is one signed JSON call; anywhere else
`read()` answers None and the caller uses Powertools, as before. Cached as Powertools caches
it (per secret, `max_age` seconds); `fresh` reads again (after a password rotation the
cached one fails to authenticate).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Mapping

from pgkick.awsapi.signed_http import SignedHttp, lambda_target

_lock = threading.Lock()
_cache: dict[str, tuple[float, str]] = {}  # secret id -> (read at, monotonic; its text)
_clients: dict[str, SignedHttp] = {}  # endpoint -> its connections, kept between reads


def read(
    secret_id: str,
    *,
    max_age: float = 300.0,
    fresh: bool = False,
    timeout: float = 5.0,
    env: Mapping[str, str] = os.environ,
) -> str | None:
    """The secret's text (SecretString, or SecretBinary decoded as UTF-8); None outside
    a Lambda runtime. Raises AwsCallError when AWS refuses, OSError when unreached."""
    target = lambda_target("secretsmanager", "SECRETS_MANAGER", env)
    if target is None:
        return None
    with _lock:
        cached = _cache.get(secret_id)
        if cached and not fresh and time.monotonic() - cached[0] < max_age:
            return cached[1]
        http = _clients.get(target.endpoint)
        if http is None:
            http = _clients[target.endpoint] = SignedHttp("secretsmanager", target, timeout=timeout)
    answer = http.call(
        "GetSecretValue",
        "POST",
        "/",
        body=json.dumps({"SecretId": secret_id}).encode(),
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": "secretsmanager.GetSecretValue",
        },
    )
    if "SecretString" in answer:
        text = str(answer["SecretString"])
    else:
        text = base64.b64decode(str(answer.get("SecretBinary", ""))).decode()
    with _lock:
        _cache[secret_id] = (time.monotonic(), text)
    return text
