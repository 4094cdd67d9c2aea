"""Lambda's Invoke, as a worker sends it inside Lambda (its kicks), without boto3.

Why: a worker kicks when it fans out (before running the full batch that decided it), when
it hands its queue over, when it sweeps the queues nobody will see, and when a job's
dependants become ready. Through boto3 the first kick of an environment waited for boto3's
import and a client (about 0.4 s of CPU here, so about a second of a cold start's wall time
at the template's 512 MB), and a fan-out's batch, or the handler's answer, waited with it.
The call is one signed POST of the event (pgkick.awsapi.signed_http says where this client
is used, and how it fails and retries like botocore).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pgkick.awsapi.signed_http import SignedClient
from pgkick.errors import InvalidArgument


class InvokeClient(SignedClient):
    """invoke as boto3's Lambda client takes and answers it (its parameter names, so the
    kicker calls either client the same way), for asynchronous invokes only: the kicker's."""

    SERVICE, ENV_NAME = "lambda", "LAMBDA"

    def invoke(
        self, *, FunctionName: str, InvocationType: str = "Event", Payload: bytes = b""
    ) -> dict[str, Any]:
        if InvocationType != "Event":  # a synchronous answer's payload is not JSON to parse
            raise InvalidArgument(
                f"asynchronous invokes only (InvocationType 'Event'), not {InvocationType!r}: "
                "use boto3's Lambda client for the others"
            )
        status, _ = self.http.call(
            "Invoke",
            "POST",
            f"/2015-03-31/functions/{quote(FunctionName, safe='')}/invocations",
            body=Payload,
            headers={"X-Amz-Invocation-Type": InvocationType},
        )
        return {"StatusCode": status}
