"""The two EventBridge Scheduler calls a worker makes, inside Lambda, without boto3.

Why: a worker books its rescue (CreateSchedule) before its first job runs and removes it
(DeleteSchedule) when it leaves; wake-ups are CreateSchedule too. Through boto3 the first
booking of an environment cost 0.4 s of imports and client set-up here, and each job
committed meanwhile waited for it: the trickle's p99 (227..414 ms from the first claim
against 3..4 ms after the first batch) and half the cold path's commit to finish (813 ms
against 417 ms to the claim). Both calls are plain REST-JSON (pgkick.awsapi.signed_http says
where this client is used, and how it fails and retries like botocore).
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

from pgkick.awsapi.signed_http import SignedClient


class SchedulerClient(SignedClient):
    """create_schedule and delete_schedule, as boto3's client takes and answers them
    (boto3's parameter names, so the kicker calls either client the same way)."""

    SERVICE, ENV_NAME = "scheduler", "SCHEDULER"

    def create_schedule(self, *, Name: str, **fields: Any) -> dict[str, Any]:
        body = {"ClientToken": str(uuid.uuid4())} | fields  # one token, kept by the retry
        return self.http.call(
            "CreateSchedule",
            "POST",
            f"/schedules/{quote(Name, safe='')}",
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )[1]

    def delete_schedule(
        self, *, Name: str, GroupName: str | None = None, ClientToken: str | None = None
    ) -> dict[str, Any]:
        query = {"clientToken": ClientToken or str(uuid.uuid4())}
        if GroupName:
            query["groupName"] = GroupName
        return self.http.call(
            "DeleteSchedule", "DELETE", f"/schedules/{quote(Name, safe='')}", query=query
        )[1]
