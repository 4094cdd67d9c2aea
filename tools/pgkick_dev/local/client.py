"""PGKICK_KICKER=local: a thin client handing kicks and wake-ups to a running `pgkick dev`.

Why not processes of the app's own: they would be the caller's children and die
with it (a script that enqueues and exits left its job queued for good). Handed
to the dev server, a kick outlives its caller, as an asynchronous Lambda invoke
does. The calls are the dev server's Lambda and Scheduler APIs, the ones
pgkick.kick.LambdaKicker makes in production (kicks as Event invokes; wake-ups and
rescues as one-time schedules, named and rounded to the minute the same way).

Finding the stack happens when the kicker is made, before anything is written:
at PGKICK_DEV_URL (default http://127.0.0.1:3001), and again whenever that address
refuses a call (a long-running app outlives the detached stack it started). With
none there, one is started detached (it stops by itself once nothing has been
pending for PGKICK_DEV_IDLE_EXIT seconds, 60 by default, and its log is
.pgkick/dev.log), unless PGKICK_DEV_AUTOSTART=0: then a ConfigError says to start
`pgkick dev`. Never a committed job that nothing will run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg

from pgkick import config
from pgkick.awsapi.signature import Credentials, sign
from pgkick.connections.db import database_identity
from pgkick.errors import ConfigError
from pgkick.kick.kickers import (
    book_wake,
    booking_minute,
    first_minute,
    kick_event,
    one_time_schedule,
)
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN

DEFAULT_URL = "http://127.0.0.1:3001"
IDLE_EXIT_SECONDS = 60.0  # a detached stack stops this long after nothing is pending
START_TIMEOUT = 60.0  # seconds for a detached stack to answer (it may start PostgreSQL)


def status(url: str, timeout: float = 0.5) -> dict[str, Any] | None:
    """The running stack's status, or None when nothing answers there as `pgkick dev`."""
    try:
        with urllib.request.urlopen(f"{url}/_pgkick/status", timeout=timeout) as answer:
            found: dict[str, Any] = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    return found if found.get("pgkick_dev") else None


def idle_exit_seconds(env: Mapping[str, str]) -> float:
    """PGKICK_DEV_IDLE_EXIT: how long a detached stack waits with nothing pending before
    it stops (seconds, default IDLE_EXIT_SECONDS); refused before anything is written."""
    raw = env.get("PGKICK_DEV_IDLE_EXIT", "").strip()
    if not raw:
        return IDLE_EXIT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 86_400:
        raise ConfigError(
            f"PGKICK_DEV_IDLE_EXIT={raw!r}: give the seconds a detached `pgkick dev` waits "
            f"with nothing pending before it stops, over 0 and at most 86400 (default "
            f"{IDLE_EXIT_SECONDS:.0f})"
        )
    return seconds


def start_detached(url: str, env: Mapping[str, str], idle_exit: float) -> Path:
    """`pgkick dev` in its own session, outliving this process, stopping `idle_exit` s
    after nothing is pending; returns its log's path."""
    log = Path(".pgkick") / "dev.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    port = url.rsplit(":", 1)[-1].strip("/")
    argv = [
        sys.executable,
        "-c",
        "import sys; from pgkick.cli import main; sys.exit(main())",
        "dev",
        "--port",
        port,
        "--exit-when-idle",
        str(idle_exit),
    ]
    with log.open("ab") as out:
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    return log.resolve()


def connect(env: Mapping[str, str]) -> DevClient:
    url = (env.get("PGKICK_DEV_URL") or DEFAULT_URL).rstrip("/")
    idle_exit_seconds(env)  # refused whether or not a stack answers
    return DevClient(url, str(find_or_start(url, env)["worker"]), env=env)


def find_or_start(url: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The status of the stack at `url`, started detached if none answers there (unless
    PGKICK_DEV_AUTOSTART=0), refused if it runs its workers elsewhere (another database or
    schema) than this process enqueues; every refusal comes before anything is written."""
    found = status(url)
    if found is None:
        if env.get("PGKICK_DEV_AUTOSTART", "1") == "0":
            raise ConfigError(
                f"PGKICK_KICKER=local: no `pgkick dev` answers at {url}: start it in another "
                "terminal (`pgkick dev`), or set PGKICK_DEV_URL to where it runs"
            )
        log = start_detached(url, env, idle_exit_seconds(env))
        deadline = time.monotonic() + START_TIMEOUT
        while found is None and time.monotonic() < deadline:
            time.sleep(0.2)
            found = status(url)
        if found is None:
            raise ConfigError(
                f"PGKICK_KICKER=local: `pgkick dev` started at {url} did not answer in "
                f"{START_TIMEOUT:.0f} s (its log: {log}): start it yourself with `pgkick dev`"
            )
        print(
            f"pgkick: started `pgkick dev` at {url}, detached: it stops once nothing is "
            f"pending; its log: {log}",
            file=sys.stderr,
            flush=True,
        )
    _check_database(url, found)
    return found


def _check_database(url: str, found: Mapping[str, Any]) -> None:
    """Refuse, before anything is written, a stack that runs its workers on another
    database or schema than this process enqueues into: its workers would never see this
    job (a stack left from an earlier run, on another project's database or schema)."""
    theirs, their_schema = found.get("database"), found.get("schema")
    try:
        settings = config.app_settings()
        ours, our_schema = database_identity(settings.dsn()), settings.schema
    except (ConfigError, psycopg.ProgrammingError):  # no DSN known here: nothing to compare
        return
    if theirs and theirs != ours:
        raise ConfigError(
            f"PGKICK_KICKER=local: the `pgkick dev` at {url} runs its workers on {theirs}, "
            f"this process enqueues into {ours}: stop it, or set PGKICK_DEV_URL to another "
            "port (a stack starts there), or give both the same DATABASE_URL"
        )
    if their_schema and their_schema != our_schema:
        raise ConfigError(
            f"PGKICK_KICKER=local: the `pgkick dev` at {url} runs its workers on schema "
            f"{their_schema}, this process enqueues into schema {our_schema}: stop it, or "
            "set PGKICK_DEV_URL to another port (a stack starts there), or give both the "
            "same PGKICK_SCHEMA"
        )


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
