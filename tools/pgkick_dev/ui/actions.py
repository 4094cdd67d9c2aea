"""The dashboard's buttons: retry a failed job, cancel a waiting, queued or running one.

Why so guarded: these change production rows. Each is a POST (a link or a prefetch
cannot trigger it) from one of the dashboard's own pages (guard.cross_origin), on a
dashboard started with --allow-actions, naming a job that exists; and each runs
pgkick.cli.operations, the calls `pgkick retry` and `pgkick cancel` make, on one
connection closed before the answer.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from pgkick.cli import operations
from pgkick.errors import JobMissing, UsageError
from pgkick.kick.default import default_kicker
from pgkick.store.inspect import parse_id
from pgkick_dev.ui.context import Settings, settings_of
from pgkick_dev.ui.guard import cross_origin


def _allowed(request: Request) -> tuple[Settings, int]:
    settings = settings_of(request)
    if not settings.allow_actions:
        raise HTTPException(403, "read-only: start the dashboard with --allow-actions to act")
    refused = cross_origin(request)
    if refused:
        raise HTTPException(403, refused)
    return settings, parse_id(request.path_params["job_id"])


def _done(request: Request, job_id: int, message: str) -> Response:
    root = request.scope.get("root_path", "")
    return RedirectResponse(f"{root}/jobs/{job_id}?message={quote(message)}", status_code=303)


def _refused(exc: UsageError) -> HTTPException:
    status = 404 if isinstance(exc, JobMissing) else 409
    return HTTPException(status, str(exc))


def retry(request: Request) -> Response:
    settings, job_id = _allowed(request)
    try:
        with settings.store() as store:
            operations.check_ids(store, [job_id], "failed")
            retried = operations.retry(store, ids=[job_id])
    except UsageError as exc:
        raise _refused(exc) from None
    operations.kick_queues(retried.jobs, settings.kicker or default_kicker())
    message = "retried: queued again with one more attempt"
    if retried.revived:
        message += f"; {retried.revived} dependant(s) it had failed wait for it again"
    return _done(request, job_id, message)


def cancel(request: Request) -> Response:
    settings, job_id = _allowed(request)
    try:
        with settings.store() as store:
            operations.check_ids(store, [job_id], "queued|running")
            cancelled, marked, released = operations.cancel(store, ids=[job_id])
    except UsageError as exc:
        raise _refused(exc) from None
    operations.kick_released(released, lambda: settings.kicker or default_kicker())
    message = "cancelled" if cancelled else "cancelling: the job fails when its task stops"
    return _done(request, job_id, message if cancelled or marked else "nothing changed")
