"""PGKICK_KICKER=local: a thin client handing kicks and wake-ups to a running `pgkick dev`.

Why not processes of the app's own: they would be the caller's children and die
with it (a script that enqueues and exits left its job queued for good). Handed
to the dev server, a kick outlives its caller, as an asynchronous Lambda invoke
does. The calls are the dev server's Lambda and Scheduler APIs, the ones
pgkick.kick.LambdaKicker makes in production (kicks as Event invokes; wake-ups and
rescues as one-time schedules, named and rounded to the minute the same way).

Finding (or starting) the stack is pgkick_dev.local.autostart's, when the kicker is made
and again whenever the stack's address refuses a call.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pgkick.awsapi.signature import Credentials, sign
from pgkick.kick.kickers import (
    book_wake,
    booking_minute,
    first_minute,
    kick_event,
    one_time_schedule,
)
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN
from pgkick_dev.local.autostart import DEFAULT_URL, find_or_start, idle_exit_seconds


def connect(env: Mapping[str, str]) -> DevClient:
    url = (env.get("PGKICK_DEV_URL") or DEFAULT_URL).rstrip("/")
    idle_exit_seconds(env)  # refused whether or not a stack answers
    return DevClient(url, str(find_or_start(url, env)["worker"]), env=env)


class PastMinute(RuntimeError):
    """The dev Scheduler refused a one-time schedule's at() as already past."""


class DevClient:
    """The Kicker protocol over the dev server's Lambda and Scheduler APIs.

    Made once per process (pgkick.kick.default), it may outlive the stack it found: a
    detached stack stops once idle while a web app or a shell runs on. With `env` (as
    connect() gives it), a call the stack's address refuses finds or starts a stack
    again, with connect()'s refusals, and is sent once more: locally, no sweep or
    reaper would ever run the job its kick was for."""

    runs_jobs_nearby = True  # `pgkick enqueue` waits for the job (pgkick.cli.main)

    def __init__(
        self,
        url: str,
        function: str,
        timeout: float = 2.0,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.url, self.function, self.timeout, self.env = url, function, timeout, env
        self._restart_lock = threading.Lock()

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        body = json.dumps(kick_event(queue, reason, hop)).encode()
        path = f"/2015-03-31/functions/{self.function}/invocations"
        self._call("POST", path, body, {"X-Amz-Invocation-Type": "Event"}, expect=202)

    def wake_at(self, queue: str, when: datetime) -> None:
        """As LambdaKicker books one: a margin ahead, and a minute further if refused."""
        event = kick_event(queue, "wake")
        book_wake(
            lambda name, at: self._schedule(name, at, event),
            queue,
            first_minute(when),
            lambda exc: isinstance(exc, PastMinute),
        )

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        self._schedule(name, booking_minute(when), kick_event(queue, "rescue"))

    def cancel_rescue(self, name: str) -> None:
        self._call(
            "DELETE", f"/schedules/{name}?groupName=default", None, {}, expect=200, ignore=404
        )

    def _schedule(self, name: str, minute: datetime, event: dict[str, Any]) -> None:
        body = one_time_schedule(
            name,
            minute,
            event,
            function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{self.function}",
            role_arn="arn:aws:iam::123456789012:role/pgkick-dev",
            dead_letter_arn=LOCAL_DLQ_ARN,
        )
        del body["Name"]
        self._call(
            "POST", f"/schedules/{name}", json.dumps(body).encode(), {}, expect=200, ignore=409
        )

    def _call(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        expect: int,
        ignore: int | None = None,
    ) -> None:
        try:
            self._send(method, path, body, headers, expect=expect, ignore=ignore)
        except urllib.error.URLError as exc:
            refused = isinstance(exc.reason, ConnectionRefusedError)
            if not refused or self.env is None:
                raise
            with self._restart_lock:  # concurrent kicks start one stack, not one each
                find_or_start(self.url, self.env)
            self._send(method, path, body, headers, expect=expect, ignore=ignore)

    def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        expect: int,
        ignore: int | None = None,
    ) -> None:
        route, _, query = path.partition("?")
        signed = sign(  # the stack checks signatures as AWS does (devserver.signatures)
            Credentials("pgkick-dev", "pgkick-dev"),
            region="us-east-1",
            service="lambda" if route.startswith("/2015-03-31/") else "scheduler",
            method=method,
            host=urlsplit(self.url).netloc,
            path=route,
            query=dict(parse_qsl(query)),
            headers={"Content-Type": "application/json", **headers},
            body=body or b"",
            now=datetime.now(UTC),
        )
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=signed)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                status_code = answer.status
        except urllib.error.HTTPError as exc:
            if exc.code == ignore:
                return
            text = exc.read()[:200]
            if exc.code == 400 and b"in the past" in text:
                raise PastMinute(text.decode(errors="replace")) from None
            raise RuntimeError(f"pgkick dev at {self.url} answered {exc.code}: {text!r}") from None
        if status_code != expect:
            raise RuntimeError(f"pgkick dev at {self.url} answered {status_code}, not {expect}")
