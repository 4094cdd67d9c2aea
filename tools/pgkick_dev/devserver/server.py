"""The dev server: one Starlette app (Lambda's and Scheduler's APIs, the dashboard at /),
served by uvicorn on 127.0.0.1, in this process's thread or as `pgkick dev`'s main loop.

Why localhost only by default: anything that can reach the port can run the app's
code with its database. A request from elsewhere gets 403 unless the server was
started with --host (`allow_remote`). `GET /_pgkick/status` is how the local
kicker (PGKICK_KICKER=local) finds a running stack and what it is doing.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import ipaddress
import os
import threading
import time
from collections.abc import Collection
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from pgkick import config
from pgkick.connections.db import database_identity
from pgkick_dev.devserver import lambda_api, scheduler_api
from pgkick_dev.devserver.ports import PortTaken, free_port, taken_by_another
from pgkick_dev.devserver.stack import Stack
from pgkick_dev.ui.guard import LOCALHOST, HostGuard, host_name

NOT_INSTALLED = "<p>The pgkick dashboard is not installed (pgkick_dev.ui is missing).</p>\n"


class LocalOnly:
    """403 for a client that is not this machine (unless remote clients are allowed), and
    for a Host header naming a host the server was not started for.

    Why the Host header too: a web page elsewhere can rebind its own name to 127.0.0.1
    (DNS rebinding); the browser on this machine then sends its requests here as the page's
    own origin, free to read the answers and to invoke the worker or book schedules (an
    access key the server does not know is accepted unchecked). Loopback names, IP
    addresses (typed, not looked up) and the names given (`--host`, `--allowed-host`) are
    served; another name is refused, as pgkick_dev.ui.guard refuses it for the dashboard."""

    def __init__(self, app: ASGIApp, allow_remote: bool, names: Collection[str] = ()) -> None:
        self.app, self.allow_remote = app, allow_remote
        self.guard = HostGuard(None if allow_remote else LOCALHOST, names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self._refusal(scope)
            if problem:
                await JSONResponse({"message": problem}, 403)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> str | None:
        host = (scope.get("client") or ("", 0))[0]
        if not self.allow_remote:
            try:
                local = ipaddress.ip_address(host).is_loopback
            except ValueError:
                local = host in ("testclient", "localhost")
            if not local:
                return (
                    f"pgkick dev serves this machine only ({host} refused): "
                    "restart it with --host to serve others"
                )
        name = host_name(Request(scope).headers.get("host", ""))
        if self.guard.host_allowed(name):
            return None
        return (
            f"pgkick dev: Host {name!r} is not a name this server was started for (a page "
            "elsewhere rebinding its name here is refused); if it is yours, restart with "
            f"--host ADDRESS --allowed-host {name or 'NAME'}"
        )


def dashboard(dsn: str | None, stack: Stack, allow_actions: bool, awake: Any = None) -> ASGIApp:
    """The dashboard (pgkick_dev.ui.app.make_app) if installed, else a one-line page;
    `awake`: the activity monitor whose measured spans its timeline shows."""
    try:
        make_dashboard = importlib.import_module("pgkick_dev.ui.app").make_app
    except ModuleNotFoundError as exc:
        if exc.name not in ("pgkick_dev.ui", "pgkick_dev.ui.app"):
            raise  # the dashboard is there but broken: say so, do not hide it

        async def missing(request: Request) -> Response:
            return HTMLResponse(NOT_INSTALLED)

        return Starlette(routes=[Route("/{path:path}", missing)])
    extra = {} if awake is None else {"awake": awake, "awake_window": awake.report.window}
    app: ASGIApp = make_dashboard(
        dsn or "", timeline=stack.timeline, allow_actions=allow_actions, **extra
    )
    return app


def make_app(
    stack: Stack,
    *,
    dsn: str | None = None,
    schema: str | None = None,
    allow_remote: bool = False,
    allow_actions: bool = False,
    banner: dict[str, Any] | None = None,
    with_dashboard: bool = True,
    awake: Any = None,
    host_names: Collection[str] = (),
) -> ASGIApp:
    """The dev server's app; `with_dashboard=False` serves the APIs alone (the in-process
    stack of LocalKicker, which its environments call back). `awake`: an AwakeMonitor
    on the embedded database, whose measurements the dashboard's timeline shows.
    `schema`: the one its workers use (PGKICK_SCHEMA, `--schema`; by default the
    process's now), in its status so that a client enqueueing elsewhere is refused."""
    workers_schema = schema or config.app_settings().schema

    async def status(request: Request) -> Response:
        with stack.lock:
            pending = {name: q.pending() for name, q in stack.functions.items()}
            schedules = stack.one_time_schedules()
        return JSONResponse(
            {
                "pgkick_dev": True,
                "pid": os.getpid(),  # a caller that started it detached may stop it
                "database": database_identity(dsn) if dsn else None,  # no password
                "schema": workers_schema,
                "worker": next(iter(stack.functions)),
                "functions": sorted(stack.functions),
                "pending": pending,
                "one_time_schedules": schedules,
                "settings": banner or {},
            }
        )

    routes: list[BaseRoute] = [
        Route("/_pgkick/status", status),
        *lambda_api.routes(stack),
        *scheduler_api.routes(stack),
    ]
    if with_dashboard:
        routes.append(Mount("/", dashboard(dsn, stack, allow_actions, awake)))
    return LocalOnly(Starlette(routes=routes), allow_remote, host_names)


class ServerThread:
    """uvicorn in a daemon thread: the in-process dev server the tests talk to over HTTP."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port or free_port(host)
        config = uvicorn.Config(
            app,
            host=self.host,
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with contextlib.suppress(SystemExit):  # uvicorn's answer to a failed bind: see __enter__
            self.server.run()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                if taken_by_another(self.host, self.port):
                    raise PortTaken(errno.EADDRINUSE, f"{self.url} is in use")
                raise RuntimeError(f"the dev server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
