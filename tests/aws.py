"""moto helpers: a worker function that exists, and a record of every AWS call made."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

import boto3

WORKER = "pgkick-worker"


@dataclass
class CallLog:
    """Every API call a boto3 client made: (operation, params, HTTP status)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    statuses: list[tuple[str, int]] = field(default_factory=list)

    def attach(self, client: Any) -> Any:
        """Record one client's calls."""
        service = client.meta.service_model.service_name
        client.meta.events.register(f"before-parameter-build.{service}", self._before)
        client.meta.events.register(f"after-call.{service}", self._after)
        return client

    def attach_default_session(self) -> None:
        """Record the calls of every client made from now on with boto3.client(...)."""
        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("before-parameter-build", self._before)
        boto3.DEFAULT_SESSION.events.register("after-call", self._after)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.name, dict(params)))

    def _after(self, http_response: Any, model: Any, **_: Any) -> None:
        self.statuses.append((model.name, http_response.status_code))

    def named(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == operation]

    def kicks(self) -> list[dict[str, Any]]:
        return [json.loads(p["Payload"]) for p in self.named("Invoke")]


def create_worker_function(name: str = WORKER) -> str:
    """A Lambda function in moto (its code never runs there); returns its ARN."""
    iam = boto3.client("iam")
    role = iam.create_role(
        RoleName=f"{name}-role",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "sts:AssumeRole",
                        "Principal": {"Service": "lambda.amazonaws.com"},
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("worker/app.py", "def handler(event, context):\n    return event\n")
    created = boto3.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="worker.app.handler",
        Code={"ZipFile": archive.getvalue()},
    )
    return str(created["FunctionArn"])
