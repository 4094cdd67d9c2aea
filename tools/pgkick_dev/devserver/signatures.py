"""The dev server checks AWS signatures as AWS does, for the credentials it knows.

Why: inside Lambda the worker signs its Scheduler calls itself (pgkick.awsapi.signature),
without botocore. A stand-in that took any request would let a broken signer pass every
local test and fail on AWS's first call. So the Lambda and Scheduler APIs here refuse, as
AWS refuses (403, its error codes and messages):
- a request with no Authorization (MissingAuthenticationTokenException);
- a signature scoped to another service or region, or dated otherwise than its
  X-Amz-Date (InvalidSignatureException);
- with the credentials this stack hands its environments (pgkick-dev) or the ones its
  docs give an app (dev / dev), a signature that does not match the request as it
  arrived (InvalidSignatureException).
Other access keys are accepted unchecked: their secret is not known here (an app's own
credentials). The clock is not checked (AWS refuses a request 5 minutes off): the
stack's clock may be a test's, far from the signer's.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl

from starlette.requests import Request

from pgkick.awsapi.signature import ALGORITHM, canonical_query, canonical_request, signature

REGION = "us-east-1"  # the stack's ARNs' region
KNOWN = {"pgkick-dev": "pgkick-dev", "dev": "dev"}  # access key -> secret key
_AUTHORIZATION = re.compile(
    ALGORITHM + r" Credential=([^/,\s]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
    r"SignedHeaders=([a-z0-9;\-]+),\s*Signature=([0-9a-f]{64})$"
)
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method. Consult the service documentation for "
    "details."
)


def refusal(
    service: str,
    method: str,
    raw_path: bytes,
    query_string: bytes,
    headers: Mapping[str, str],
    body: bytes,
) -> tuple[str, str] | None:
    """(AWS's error code, its message) when AWS would refuse the request's signature; None
    when it would accept it, or cannot be told (an unknown access key). headers: the
    request's, names in lower case."""
    given = headers.get("authorization")
    if not given:
        return "MissingAuthenticationTokenException", "Missing Authentication Token"
    found = _AUTHORIZATION.match(given.strip())
    if found is None:
        return "IncompleteSignatureException", f"Authorization header requires {ALGORITHM}"
    key, day, region, scoped, names, claimed = found.groups()
    if scoped != service:
        return (
            "InvalidSignatureException",
            f"Credential should be scoped to correct service: '{service}'.",
        )
    if region != REGION:
        return "InvalidSignatureException", "Credential should be scoped to a valid region."
    stamp = headers.get("x-amz-date", "")
    if stamp[:8] != day:
        return (
            "InvalidSignatureException",
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
            "from HTTP",
        )
    secret = KNOWN.get(key)
    if secret is None:
        return None
    signed = names.split(";")
    if "host" not in signed or any(name not in headers for name in signed):
        return "InvalidSignatureException", MISMATCH
    query = canonical_query(dict(parse_qsl(query_string.decode(), keep_blank_values=True)))
    canonical, _ = canonical_request(
        method, raw_path.decode(), query, {name: headers[name] for name in signed}, body
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    if not hmac.compare_digest(signature(secret, stamp, scope, canonical), claimed):
        return "InvalidSignatureException", MISMATCH
    return None


async def request_refusal(request: Request, service: str) -> tuple[str, str] | None:
    """refusal() for a request as it reached the server (its raw path and query)."""
    headers: dict[str, str] = {}
    for name, value in request.scope["headers"]:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    return refusal(
        service,
        request.method,
        raw_path,
        request.scope.get("query_string", b""),
        headers,
        await request.body(),
    )
