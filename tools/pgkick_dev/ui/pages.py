"""The dashboard's pages: queues and schedules, jobs, one job, the timeline (dev mode).

Each page reads what it shows in one short connection (Settings.reader), through the
same JobReader as `pgkick jobs` and `pgkick job`.
"""

from __future__ import annotations

import json
import math
import re
import time
from argparse import ArgumentTypeError
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from pgkick.cli.types import instant
from pgkick.errors import InvalidArgument
from pgkick.kick.kickers import schedule_name, wake_minute
from pgkick.store.inspect import MAX_LIMIT, STATUSES, JobFilter, parse_id
from pgkick.store.workflows import critical_path, summary, workflow_jobs
from pgkick.tasks.recurring import periodic_registry
from pgkick_dev.local.cron import next_tick
from pgkick_dev.ui import timeline as tl
from pgkick_dev.ui.context import Settings, job_id_of, render, settings_of

# The menu's page sizes: its largest is the one limit the URL takes too (?limit=), the
# store's (`pgkick jobs --limit`): the menu stopped at 200 while the URL took 500.
PAGE_SIZES = (25, 50, 100, 200, MAX_LIMIT)
EVENTS_KEPT = 10_000  # what `pgkick dev` keeps (pgkick_dev.devserver.timeline.Timeline)
DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", re.ASCII)  # /timeline?minutes=
WAKEUPS_SHOWN = 500  # a job page's kicks and wake-ups, at most
WAKE_KINDS = ("kick", "schedule_create", "schedule_fire", "schedule_delete", "drop", "retry")


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = float(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def limits(queue: dict[str, Any]) -> list[str]:
    """A queue's limits as the overview says them (`pgkick limit`): running, rate, per key."""
    said = []
    if queue["max_running"]:
        said.append(f"{queue['running']} of {queue['max_running']} running")
    if queue["rate_limit"]:
        every = period(queue["rate_period_seconds"])
        said.append(f"{queue['rate_limit']} starts per {every} per rate key")
    if queue["concurrency"]:
        said.append(f"{queue['concurrency']} running per group key")
    return said


def period(seconds: float) -> str:
    """A rate's period in the unit it was most likely given in (10/1m reads "1 min")."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:g} s"


def overview(request: Request) -> Response:
    settings = settings_of(request)
    with settings.reader() as reader:
        queues = reader.queues()
        ticks = reader.latest_ticks()
    now = datetime.now(UTC)
    schedules = []
    for periodic in sorted(periodic_registry.declared.values(), key=lambda p: p.name):
        try:
            upcoming = next_tick(periodic.expression, periodic.timezone, now)
        except ValueError as exc:
            upcoming = None
            periodic_problem = str(exc)
        else:
            periodic_problem = ""
        schedules.append(
            {
                "periodic": periodic,
                "last": ticks.get(periodic.name),
                "next": upcoming,
                "problem": periodic_problem,
            }
        )
    for queue in queues:
        queue["oldest_ready"] = age(queue["oldest_ready_seconds"])
        queue["limits"] = limits(queue)
    return render(
        request,
        "overview.html",
        queues=queues,
        schedules=schedules,
        task_modules=settings.task_modules,
        task_problem=settings.task_problem,
        now=now,
    )


def _instant(name: str, text: str | None) -> datetime | None:
    """since/until as `pgkick jobs` reads them (an ISO time with its offset, or 7d ago);
    a bad one is a 400 naming it, never a list that ignores it."""
    if not text:
        return None
    try:
        return instant(text)
    except ArgumentTypeError as exc:
        raise InvalidArgument(f"{name}: {exc}") from None


def jobs(request: Request) -> Response:
    query = request.query_params
    filters = JobFilter.of(
        status=query.get("status"),
        task=query.get("task"),
        queue=query.get("queue"),
        unique_key=query.get("unique_key"),
        group=query.get("group"),
        since=_instant("since", query.get("since")),
        until=_instant("until", query.get("until")),
        error=query.get("error"),
    )
    after = parse_id(query["after"]) if query.get("after") else None
    text = query.get("limit") or "50"
    # ASCII digits only (int() read full-width digits and "5_0" as 50); one message for
    # every bad value, the bounds the menu offers included
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_LIMIT):
        raise InvalidArgument(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {text!r}")
    limit = int(text)
    with settings_of(request).reader() as reader:
        page = reader.page(filters, after=after, limit=limit)
    link = filters.as_query() | ({"limit": str(limit)} if limit != 50 else {})
    older = None if page.next_after is None else link | {"after": str(page.next_after)}
    return render(
        request,
        "jobs.html",
        page=page,
        filters=filters,
        first_link=urlencode(link),
        next_link=None if older is None else urlencode(older),
        statuses=STATUSES,
        after=after,
        limit=limit,
        sizes=PAGE_SIZES,
    )


def workflow(request: Request) -> Response:
    """A workflow (pgkick.Workflow) from any of its jobs: `pgkick workflow ID`'s view."""
    job_id = job_id_of(request)
    with settings_of(request).reader() as reader:
        found = workflow_jobs(reader, job_id)
    if not found:
        raise HTTPException(404, f"job {job_id} does not exist")
    path = critical_path(found)
    return render(
        request, "workflow.html", jobs=found, statuses=summary(found), path=path, on=set(path.ids)
    )


def job(request: Request) -> Response:
    settings = settings_of(request)
    job_id = job_id_of(request)
    with settings.reader() as reader:
        found = reader.job(job_id)
    if found is None:
        raise HTTPException(404, f"job {job_id} does not exist")
    read_at: datetime = found["read_at"]
    wake = None
    if found["status"] == "queued" and found["run_at"] > read_at:
        minute = wake_minute(found["run_at"])
        wake = {"at": minute, "name": schedule_name(found["queue"], minute)}
    return render(
        request,
        "job.html",
        job=found,
        payload=_json(found["payload"], sort_keys=True),
        result=None if found["result"] is None else _json(found["result"]),
        wake=wake,
        wakeups=_wakeups(settings, found, read_at),
        message=request.query_params.get("message"),
    )


def _json(value: Any, *, sort_keys: bool = False) -> str:
    """A payload or result as the page shows it: indented JSON in its own letters (json's
    default \\u escapes made "東京" unreadable, and a browser's find missed it)."""
    return json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=False)


def _wakeups(settings: Settings, job: dict[str, Any], read_at: datetime) -> list[dict[str, Any]]:
    """The local stack's kicks and scheduled wake-ups of the job's queue during its life
    (the first WAKEUPS_SHOWN).

    Why every event kept is read: `events()` gives the newest ones since a time, and the
    newest 500 since the job's creation were those after its end once 500 more had
    happened (a burst): its own kicks were cut before its life was picked out."""
    if settings.timeline is None:
        return []
    start = (job["created_at"] - timedelta(seconds=1)).timestamp()
    end = (job["finished_at"] or read_at).timestamp() + 1
    events = settings.timeline.events(since=start, limit=EVENTS_KEPT)
    return [
        _shown(e)
        for e in events
        if e["kind"] in WAKE_KINDS and e.get("queue") in (None, job["queue"]) and e["at"] <= end
    ][:WAKEUPS_SHOWN]


def _shown(event: dict[str, Any]) -> dict[str, Any]:
    """An event with every optional field present (None when absent) and its time shown."""
    optional = dict.fromkeys(("function", "request_id", "queue", "hop", "duration_ms", "detail"))
    return optional | event | {"when": tl.when(float(event["at"]))}


def timeline(request: Request) -> Response:
    settings = settings_of(request)
    if settings.timeline is None:
        raise HTTPException(404, "the timeline is shown by `pgkick dev` only")
    text = request.query_params.get("minutes") or "15"
    # ASCII digits with a decimal point only: float() read full-width digits and "1_5" too
    minutes = float(text) if DECIMAL.fullmatch(text) else math.nan
    if not (math.isfinite(minutes) and minutes > 0):  # inf was a 500 while rendering
        raise InvalidArgument(f"minutes must be a positive number, not {text!r}")
    now = time.time()
    since = now - minutes * 60
    events = settings.timeline.events(since=since, limit=2000)
    runs = tl.invocations(events)
    if settings.awake is not None:  # measured by the activity monitor
        awake = tl.clipped(settings.awake.awake_spans(), since)
        kept = sorted(settings.awake.kept_awake_by().items(), key=lambda item: -item[1])
        lane = "database awake (measured)"
    else:
        awake, kept = tl.awake_spans(runs, settings.awake_window, now), []
        lane = "database awake (est.)"
    return render(
        request,
        "timeline.html",
        events=[_shown(e) for e in reversed(events)][:300],
        runs=runs,
        awake=[(tl.when(a), tl.when(b), b - a) for a, b in awake],
        awake_total=sum(b - a for a, b in awake),
        measured=settings.awake is not None,
        kept_awake_by=kept,
        drawing=tl.drawing(events, awake, now, lane),
        minutes=minutes,
        window=settings.awake_window,
        colours=tl.MARKS,
        when=tl.when,
    )
