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
from pgkick.errors import ConfigError, JobMissing, UsageError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import Kicker
from pgkick_dev.ui.context import Settings, job_id_of, settings_of
from pgkick_dev.ui.guard import cross_origin


def _allowed(request: Request) -> tuple[Settings, int]:
    settings = settings_of(request)
    if not settings.allow_actions:
        raise HTTPException(403, "read-only: start the dashboard with --allow-actions to act")
    refused = cross_origin(request, request.app.state.guard)
    if refused:
        raise HTTPException(403, refused)
    return settings, job_id_of(request)


def _done(request: Request, job_id: int, message: str) -> Response:
    root = request.scope.get("root_path", "")
    return RedirectResponse(f"{root}/jobs/{job_id}?message={quote(message)}", status_code=303)


def _refused(exc: UsageError) -> HTTPException:
    status = 404 if isinstance(exc, JobMissing) else 409
    return HTTPException(status, str(exc))


def _kicker(settings: Settings) -> Kicker:
    """The kicker a retry kicks, built before anything is written (as `pgkick retry` does):
    a dashboard started with no kicker configured refuses the retry, naming the settings,
    rather than commit it and then fail (it answered 503 for a job it had queued again)."""
    try:
        return settings.kicker or default_kicker()
    except ConfigError as exc:
        restart = "then start `pgkick ui` again"
        raise HTTPException(
            500, f"nothing changed: a retry kicks the job's queue, but {exc}; {restart}"
        ) from None


def retry(request: Request) -> Response:
    settings, job_id = _allowed(request)
    kicker = _kicker(settings)
    try:
        with settings.store() as store:
            operations.check_ids(store, [job_id], "failed")
            retried = operations.retry(store, ids=[job_id])
    except UsageError as exc:
        raise _refused(exc) from None
    operations.kick_queues(retried.jobs, kicker)
    message = "retried: queued again with one more attempt"
    if retried.revived:
        message += f"; {retried.revived} dependant(s) it had failed wait for it again"
    return _done(request, job_id, message)


def cancel(request: Request) -> Response:
    """A cancel is never refused for want of a kicker: it kicks only the queues "run anyway"
    dependants entered, after its commit, and a kick it cannot make is logged (a sweep or
    the reaper runs them), as `pgkick cancel ID` does."""
    settings, job_id = _allowed(request)
    try:
        with settings.store() as store:
            operations.check_ids(store, [job_id], "waiting|queued|running")
            cancelled, marked, released = operations.cancel(store, ids=[job_id])
    except UsageError as exc:
        raise _refused(exc) from None
    operations.kick_released(released, lambda: settings.kicker or default_kicker())
    message = "cancelled" if cancelled else "cancelling: the job fails when its task stops"
    return _done(request, job_id, message if cancelled or marked else "nothing changed")
