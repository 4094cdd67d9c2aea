"""AWS Signature Version 4 for a request pgkick sends without botocore.

Why: botocore's signer cannot be had alone (`botocore.auth` imports 0.15..0.2 s of
botocore), and a worker's cold start must not pay for botocore (pgkick.awsapi.signed_http).
Signing is a few HMACs over a canonical form of the request, written down by AWS; this is
that form, for the requests pgkick.awsapi sends. tests/test_aws_without_boto3.py checks it
against AWS's published example and against botocore's `SigV4Auth` over the bytes sent.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None = None


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def canonical_query(query: dict[str, str]) -> str:
    """Keys and values percent-encoded (RFC 3986 unreserved kept), sorted by key."""
    pairs = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in query.items())
    return "&".join(f"{key}={value}" for key, value in pairs)


def canonical_request(
    method: str, path: str, query: str, headers: dict[str, str], body: bytes
) -> tuple[str, str]:
    """(canonical request, signed header names). `path` as sent on the wire (encoded once);
    services other than S3 sign it encoded once more. `query` canonical already. Every
    header in `headers` is signed: names lower-cased, values' runs of spaces collapsed."""
    lowered = {name.lower(): " ".join(value.split()) for name, value in headers.items()}
    names = sorted(lowered)
    signed = ";".join(names)
    lines = [
        method.upper(),
        quote(path or "/", safe="/~"),
        query,
        "".join(f"{name}:{lowered[name]}\n" for name in names),
        signed,
        hashlib.sha256(body).hexdigest(),
    ]
    return "\n".join(lines), signed


def signature(secret_key: str, stamp: str, scope: str, canonical: str) -> str:
    """The hex signature of `canonical` (stamp: YYYYMMDDTHHMMSSZ; scope: date/region/service/
    aws4_request)."""
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in scope.split("/"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def sign(
    credentials: Credentials,
    *,
    region: str,
    service: str,
    method: str,
    host: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    body: bytes,
    now: datetime,
) -> dict[str, str]:
    """The headers to send: `headers` plus Host, X-Amz-Date, X-Amz-Security-Token (when
    the credentials have a token) and Authorization, all of them signed."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    sent = dict(headers) | {"Host": host, "X-Amz-Date": stamp}
    if credentials.token:
        sent["X-Amz-Security-Token"] = credentials.token
    canonical, signed = canonical_request(method, path, canonical_query(query), sent, body)
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    sent["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={signed}, "
        f"Signature={signature(credentials.secret_key, stamp, scope, canonical)}"
    )
    return sent


# AWS's answer to a signature it cannot match quotes the canonical request it expected, each
# signed header's value with it: the session token's too (x-amz-security-token:...).
_TOKEN_QUOTED = re.compile(r"(x-amz-security-token[:=])[^\s'\"&]+", re.IGNORECASE)


def without_session_token(text: str, token: str | None = None) -> str:
    """`text` (an AWS error's message, ours or botocore's ClientError's) without a session
    token: any value quoted as x-amz-security-token's, and `token` (default: the process's
    AWS_SESSION_TOKEN) wherever it appears. The messages reach logs and the CLI's stderr,
    and the token signs for its role for hours."""
    text = _TOKEN_QUOTED.sub(r"\1<redacted>", text)
    token = os.environ.get("AWS_SESSION_TOKEN") if token is None else token
    return text.replace(token, "<redacted>") if token else text
