"""The web dashboard: `make_app(dsn, ...)` -> a Starlette app (`pgkick ui`, and `pgkick dev` at /).

Why it cannot keep a database awake: every page opens one connection when it is
requested and closes it before the answer is sent (no pool, no background task, no
polling); a page refreshes itself only if asked to, and only while its tab is
visible. The timeline (dev mode) is read from the local stack's memory, not the
database.

Why read-only by default: pointed at any database (`pgkick ui --dsn ...`), it shows
and changes nothing until `--allow-actions`; then its retry and cancel buttons run
pgkick.cli.operations, the same calls as `pgkick retry` and `pgkick cancel`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Collection
from pathlib import Path

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from pgkick import config
from pgkick.connections.db import DatabaseError
from pgkick.connections.schema_advice import migrate_advice
from pgkick.errors import InvalidArgument, PgkickError
from pgkick.kick.kickers import Kicker
from pgkick_dev.ui import actions, pages
from pgkick_dev.ui.context import Settings, render, utc
from pgkick_dev.ui.guard import LOCALHOST, HostGuard, LocalOnly
from pgkick_dev.ui.timeline import AwakeMeasure, Timeline

TEMPLATES = Path(__file__).parent / "templates"


def _load_tasks() -> tuple[tuple[str, ...], str | None]:
    """Import PGKICK_TASKS (their periodic declarations are the recurring schedules)."""
    modules = tuple(m.strip() for m in os.environ.get("PGKICK_TASKS", "").split(",") if m.strip())
    try:
        for module in modules:
            importlib.import_module(module)
    except Exception as exc:  # shown on the page: the dashboard still serves the rest
        return modules, f"could not import PGKICK_TASKS ({type(exc).__name__}: {exc})"
    return modules, None


def make_app(
    dsn: str,
    *,
    timeline: Timeline | None = None,
    allow_actions: bool = False,
    allowed_hosts: Collection[str] | None = LOCALHOST,
    host_names: Collection[str] = (),
    kicker: Kicker | None = None,
    schema: str | None = None,
    awake_window: float = 300.0,
    awake: AwakeMeasure | None = None,
) -> Starlette:
    """The dashboard for the database at `dsn`.

    timeline: the local stack's recorder (dev mode: the invocation and awake timelines).
    allow_actions: show and accept retry and cancel.
    allowed_hosts: client addresses served besides loopback ones (a request's Host header
    must name one of them or a loopback one); None: every client (`pgkick ui --host`), and
    the Host header must be a loopback name, an IP address or one of `host_names` (the
    address bound, `--allowed-host`): pgkick_dev.ui.guard.
    kicker: what a retry kicks (default: PGKICK_KICKER's, as `pgkick retry`).
    awake_window: seconds a serverless database stays awake after its last invocation.
    awake: the activity monitor watching this database (dev mode on the embedded database):
    the timeline shows its measured awake spans instead of the estimate."""
    modules, problem = _load_tasks()
    settings = Settings(
        dsn, timeline, allow_actions, kicker, schema, awake_window, modules, problem, awake
    )
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    environment.filters["utc"] = utc  # every time a page prints (pgkick_dev.ui.context)
    templates = Jinja2Templates(env=environment)
    guard = HostGuard(allowed_hosts, host_names)
    app = Starlette(
        routes=[
            Route("/", pages.overview, name="overview"),
            Route("/jobs", pages.jobs, name="jobs"),
            Route("/jobs/{job_id}", pages.job, name="job"),
            Route("/jobs/{job_id}/retry", actions.retry, methods=["POST"], name="retry"),
            Route("/jobs/{job_id}/cancel", actions.cancel, methods=["POST"], name="cancel"),
            Route("/workflows/{job_id}", pages.workflow, name="workflow"),
            Route("/timeline", pages.timeline, name="timeline"),
        ],
        middleware=[Middleware(LocalOnly, guard=guard)],
        exception_handlers={
            HTTPException: _http_error,
            InvalidArgument: _bad_request,
            DatabaseError: _database_error,
            PgkickError: _database_error,
        },
    )
    app.state.settings = settings
    app.state.templates = templates
    app.state.guard = guard  # the actions' Origin check reads the same host names
    return app


def _error(request: Request, status: int, title: str, message: str) -> Response:
    return render(request, "error.html", status, title=title, message=message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    titles = {
        404: "Not found",
        405: "Method not allowed",
        403: "Refused",
        409: "Nothing changed",
        500: "Not configured",  # the actions' only 500 (pgkick_dev.ui.actions._kicker)
    }
    response = _error(request, exc.status_code, titles.get(exc.status_code, "Error"), exc.detail)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _bad_request(request: Request, exc: Exception) -> Response:
    return _error(request, 400, "Bad request", str(exc))


async def _database_error(request: Request, exc: Exception) -> Response:
    message = " ".join(str(exc).split())
    if "does not exist" in message and "relation" in message:
        schema = request.app.state.settings.schema or config.app_settings().schema
        message += f" (is pgkick's schema migrated here? {migrate_advice(schema)})"
    return _error(request, 503, "Database unavailable", message)
