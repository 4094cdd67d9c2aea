"""EventBridge Scheduler's API on the dev server: the calls pgkick makes, answered as AWS does.

CreateSchedule (POST /schedules/{Name}), UpdateSchedule (PUT), GetSchedule (GET),
DeleteSchedule (DELETE, ?groupName=) and ListSchedules (GET /schedules,
?ScheduleGroup=&NamePrefix=), each signed as AWS wants it (pgkick_dev.devserver.signatures).
Errors carry `x-amzn-ErrorType` and {"Message"}, so
botocore raises ConflictException, ResourceNotFoundException, ValidationException.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pgkick_dev.devserver.schedules import SchedulerError
from pgkick_dev.devserver.signatures import request_refusal
from pgkick_dev.devserver.stack import Stack


def _error(exc: SchedulerError) -> JSONResponse:
    return JSONResponse(
        {"Message": exc.message}, exc.status, headers={"x-amzn-ErrorType": exc.code}
    )


def routes(stack: Stack) -> list[Route]:
    scheduler = stack.scheduler

    async def body_of(request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as exc:
            raise SchedulerError("ValidationException", 400, f"Malformed JSON: {exc}") from None
        if not isinstance(body, dict):
            raise SchedulerError("ValidationException", 400, "The body must be a JSON object")
        body.pop("ClientToken", None)
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
                body = await body_of(request)
                schedule = scheduler.create(name, body, replace=request.method == "PUT")
                return JSONResponse({"ScheduleArn": schedule.describe()["Arn"]})
            if request.method == "GET":
                return JSONResponse(scheduler.get(name, group).describe())
            scheduler.delete(name, group)
            return JSONResponse({})
        except SchedulerError as exc:
            return _error(exc)

    async def listing(request: Request) -> Response:
        try:
            await signed(request)
            found = scheduler.list(
                request.query_params.get("ScheduleGroup"), request.query_params.get("NamePrefix")
            )
        except SchedulerError as exc:
            return _error(exc)
        summaries = []
        for schedule in found:
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
        return JSONResponse({"Schedules": summaries})

    return [
        Route("/schedules", listing, methods=["GET"]),
        Route("/schedules/{name}", one, methods=["GET", "POST", "PUT", "DELETE"]),
    ]
