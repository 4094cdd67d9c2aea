"""What every page and action shares: the dashboard's settings and how a page is rendered.

Why a module of its own: the app builds them, the pages and actions use them, and
neither should import the app.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from pgkick.kick.kickers import Kicker
from pgkick.store.inspect import MAX_ID, JobReader, parse_id
from pgkick.store.operator import OperatorStore
from pgkick_dev.ui.timeline import AwakeMeasure, Timeline

APPLICATION_NAME = "pgkick-ui"  # how its sessions show in pg_stat_activity


@dataclass(frozen=True)
class Settings:
    dsn: str
    timeline: Timeline | None
    allow_actions: bool
    kicker: Kicker | None  # None: the default kicker (PGKICK_KICKER), asked per action
    schema: str | None
    awake_window: float
    task_modules: tuple[str, ...] = field(default=())
    task_problem: str | None = None
    awake: AwakeMeasure | None = None  # the activity monitor (dev, embedded database only)

    @contextmanager
    def reader(self) -> Iterator[JobReader]:
        """One connection for one page, closed before the page is sent."""
        with JobReader.open(
            self.dsn, schema=self.schema, application_name=APPLICATION_NAME
        ) as reader:
            yield reader

    @contextmanager
    def store(self) -> Iterator[OperatorStore]:
        """One connection for one action (the CLI's store), closed after it."""
        with OperatorStore.open(
            self.dsn, schema=self.schema, application_name=APPLICATION_NAME
        ) as s:
            yield s


def utc(value: datetime | None, shape: str = "%Y-%m-%d %H:%M:%S.%f", label: bool = True) -> str:
    """An instant as the pages show it (the `utc` filter of every template): in UTC, with
    milliseconds for `%f`, and " UTC" after it unless its column's header says so ("-" for
    None). Why converted here: psycopg gives a timestamptz in the session's TimeZone (the
    server's or the database's setting: America/New_York, an RDS parameter group), and a
    page printed that local time labelled UTC."""
    if value is None:
        return "-"
    text = value.astimezone(UTC).strftime(shape)
    text = text[:-3] if shape.endswith("%f") else text
    return f"{text} UTC" if label else text


def job_id_of(request: Request) -> int:
    """The job id of a page's or an action's path. Only ASCII digits name a job: anything
    else names no page, the 404 of any unknown path (int() read /jobs/\uff11, a full-width
    digit, as job 1). An id past bigint names a job that cannot exist: 404, as a missing
    one (PostgreSQL's "bigint out of range" was answered as a database failure, 503)."""
    text = request.path_params["job_id"]
    if not (text.isascii() and text.isdigit()):
        raise HTTPException(404)  # Starlette's own answer to a path no route matches
    if int(text) > MAX_ID:
        raise HTTPException(404, f"job {text} does not exist")
    return parse_id(text)


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
    settings: Settings = request.app.state.settings
    templates: Jinja2Templates = request.app.state.templates
    context |= {
        "root": request.scope.get("root_path", ""),
        "allow_actions": settings.allow_actions,
        "dev": settings.timeline is not None,
        "refresh": request.query_params.get("refresh") == "1",
    }
    return templates.TemplateResponse(request, name, context, status_code=status)
