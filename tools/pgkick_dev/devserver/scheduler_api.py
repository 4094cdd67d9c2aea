"""EventBridge Scheduler's API on the dev server: the calls pgkick makes, answered as AWS does.

CreateSchedule (POST /schedules/{Name}), UpdateSchedule (PUT), GetSchedule (GET),
DeleteSchedule (DELETE, ?groupName=) and ListSchedules (GET /schedules,
?ScheduleGroup=&NamePrefix=&State=&MaxResults=&NextToken=: the filters checked against the
model as a body is, 100 a page at most, as AWS pages,
so a caller that reads one page only fails here too), each signed as AWS wants it
(pgkick_dev.devserver.signatures). Errors carry `x-amzn-ErrorType` and {"Message"}, so
botocore raises ConflictException, ResourceNotFoundException, ValidationException.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pgkick_dev.devserver.schedule_checks import check_input
from pgkick_dev.devserver.schedules import SchedulerError
from pgkick_dev.devserver.signatures import request_refusal
from pgkick_dev.devserver.stack import Stack

LIST_PAGE_MAX = 100  # ListSchedules' MaxResults: 1-100 (botocore's scheduler model)


def _error(exc: SchedulerError) -> JSONResponse:
    return JSONResponse(
        {"Message": exc.message}, exc.status, headers={"x-amzn-ErrorType": exc.code}
    )


def _page(query: Any) -> tuple[int, int]:
    """ListSchedules' page: where it starts (NextToken) and its size (MaxResults, 1-100;
    AWS answers 100 at most, so a caller that does not follow NextToken misses the rest)."""
    size_text = query.get("MaxResults") or str(LIST_PAGE_MAX)
    if not size_text.isdigit() or not 1 <= int(size_text) <= LIST_PAGE_MAX:
        raise SchedulerError(
            "ValidationException",
            400,
            f"1 validation error detected: Value '{size_text}' at 'maxResults' failed to "
            f"satisfy constraint: Member must have value between 1 and {LIST_PAGE_MAX}",
        )
    token = query.get("NextToken")
    if token is None:
        return 0, int(size_text)
    try:  # binascii.Error and UnicodeDecodeError are ValueErrors
        text = base64.urlsafe_b64decode(token.encode()).decode()
        start = int(text.removeprefix("page:")) if text.startswith("page:") else -1
    except ValueError:
        start = -1
    if start < 0:
        raise SchedulerError("ValidationException", 400, "Invalid NextToken.")
    return start, int(size_text)


def _token(start: int) -> str:
    return base64.urlsafe_b64encode(f"page:{start}".encode()).decode()


def routes(stack: Stack) -> list[Route]:
    scheduler = stack.scheduler

    async def body_of(request: Request, operation: str) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as exc:
            raise SchedulerError("ValidationException", 400, f"Malformed JSON: {exc}") from None
        if not isinstance(body, dict):
            raise SchedulerError("ValidationException", 400, "The body must be a JSON object")
        token = body.pop("ClientToken", None)  # checked as AWS checks it, then not kept
        if token is not None:
            check_input(operation, {"ClientToken": token})
        return body

    async def signed(request: Request) -> None:
        refused = await request_refusal(request, "scheduler")
        if refused is not None:
            raise SchedulerError(refused[0], 403, refused[1])

    async def one(request: Request) -> Response:
        name = request.path_params["name"]
        group = request.query_params.get("groupName")
        try:
            await signed(request)
            if request.method in ("POST", "PUT"):
                operation = "UpdateSchedule" if request.method == "PUT" else "CreateSchedule"
                body = await body_of(request, operation)
                schedule = scheduler.create(name, body, replace=request.method == "PUT")
                return JSONResponse({"ScheduleArn": schedule.describe()["Arn"]})
            if request.method == "GET":
                return JSONResponse(scheduler.get(name, group).describe())
            token = request.query_params.get("clientToken")
            if token is not None:
                check_input("DeleteSchedule", {"ClientToken": token})
            scheduler.delete(name, group)
            return JSONResponse({})
        except SchedulerError as exc:
            return _error(exc)

    async def listing(request: Request) -> Response:
        try:
            await signed(request)
            query = request.query_params
            filters = {
                key: query[name]
                for key, name in (
                    ("GroupName", "ScheduleGroup"),
                    ("NamePrefix", "NamePrefix"),
                    ("State", "State"),
                )
                if name in query
            }
            check_input("ListSchedules", filters)
            found = scheduler.list(
                filters.get("GroupName"), filters.get("NamePrefix"), filters.get("State")
            )
            start, size = _page(request.query_params)
        except SchedulerError as exc:
            return _error(exc)
        summaries = []
        for schedule in found[start : start + size]:
            described = schedule.describe()
            summaries.append(
                {
                    key: described[key]
                    for key in (
                        "Arn",
                        "Name",
                        "GroupName",
                        "State",
                        "CreationDate",
                        "LastModificationDate",
                    )
                }
                | {"Target": {"Arn": described["Target"].get("Arn", "")}}
            )
        more = {"NextToken": _token(start + size)} if start + size < len(found) else {}
        return JSONResponse({"Schedules": summaries, **more})

    return [
        Route("/schedules", listing, methods=["GET"]),
        Route("/schedules/{name}", one, methods=["GET", "POST", "PUT", "DELETE"]),
    ]
