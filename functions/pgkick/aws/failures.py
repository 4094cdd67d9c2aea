"""An AWS call's failure in one line that says what to do (`pgkick schedules sync`).

Why: botocore raises its own classes with tracebacks of 50 to 90 lines; every other
pgkick command answers a failure in one line. The common causes are few and each has
one remedy: no credentials, no region, an endpoint out of reach, a refusal (a
permission, an expired token). botocore is imported on first use only, as boto3 is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pgkick.errors import AwsUnavailable

# What each refusal code asks of the operator.
_REMEDIES = {
    "AccessDeniedException": "the caller's role lacks the permission named above",
    "AccessDenied": "the caller's role lacks the permission named above",
    "UnrecognizedClientException": "the credentials are not valid: check or refresh them",
    "InvalidClientTokenId": "the credentials are not valid: check or refresh them",
    "ExpiredTokenException": "the session token expired: refresh the credentials",
    "ExpiredToken": "the session token expired: refresh the credentials",
    "ThrottlingException": "AWS throttled the calls: run it again in a minute",
}


def describe(exc: Exception, service: str) -> str | None:
    """One line for a botocore failure; None for anything else."""
    from botocore import exceptions as boto

    name = type(exc).__name__
    if isinstance(exc, boto.NoCredentialsError | boto.PartialCredentialsError):
        return (
            f"no AWS credentials found ({name}): set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or run where a role provides them"
        )
    if isinstance(exc, boto.NoRegionError):
        return "no AWS region: set AWS_DEFAULT_REGION (or a profile's region)"
    if isinstance(exc, boto.EndpointConnectionError | boto.ConnectTimeoutError):
        return (
            f"cannot reach AWS {service} at {getattr(exc, 'kwargs', {}).get('endpoint_url', '?')} "
            f"({name}): check the network, AWS_DEFAULT_REGION, or AWS_ENDPOINT_URL_"
            f"{service.upper()} if one is set"
        )
    if isinstance(exc, boto.ReadTimeoutError):
        return f"AWS {service} did not answer in time ({name}): run it again"
    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "?"))
        message = " ".join(str(error.get("Message", "")).split())
        operation = getattr(exc, "operation_name", "?")
        remedy = _REMEDIES.get(code, "see AWS's message")
        return f"AWS {service} refused {operation}: {code}: {message} ({remedy})"
    if isinstance(exc, boto.BotoCoreError):
        return f"AWS {service} call failed ({name}): {' '.join(str(exc).split())}"
    return None


@contextmanager
def one_line(service: str) -> Iterator[None]:
    """Turn a botocore failure inside the block into AwsUnavailable (one line)."""
    try:
        yield
    except Exception as exc:
        line = describe(exc, service)
        if line is None:
            raise
        raise AwsUnavailable(line) from None
