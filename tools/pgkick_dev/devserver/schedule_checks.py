"""CreateSchedule and UpdateSchedule bodies checked as EventBridge Scheduler checks them.

Why: a stand-in kinder than AWS lets a call pass locally that the deploy's first call
refuses (a name of 65 characters, a RetryPolicy of 500 attempts, an at() with an offset
the stand-in silently dropped). Why from botocore's model of the API
(botocore/data/scheduler/2021-06-30/service-2.json) and not constants: the model is what
AWS publishes as its constraints, botocore ships with boto3 (a dependency of pgkick), and
a bound AWS changes is read from the next botocore. boto3 itself checks only `required`
and `min` before sending; `max`, `pattern` and `enum` are the service's, so here.

Beyond the model, the rule its documentation states in words: FlexibleTimeWindow FLEXIBLE
needs MaximumWindowInMinutes ("Required if Mode is FLEXIBLE"). The expression and its
time zone are read where the schedule's times are (pgkick_dev.devserver.schedules). Each
refusal is a ValidationException, HTTP 400, in the wording AWS's services use
("1 validation error detected: Value ... at 'name' failed to satisfy constraint: ...").
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, NoReturn

from botocore.loaders import Loader
from botocore.model import ServiceModel, Shape

from pgkick_dev.devserver.schedules import SchedulerError

API_VERSION = "2021-06-30"


@cache
def _model() -> ServiceModel:
    return ServiceModel(Loader().load_service_model("scheduler", "service-2", API_VERSION))


def check_body(operation: str, name: str, group: str | None, body: dict[str, Any]) -> None:
    """Refuse (ValidationException) a CreateSchedule/UpdateSchedule call AWS would refuse:
    `name` from the path, `group` as given (None: the default group), `body` the rest."""
    call = {**body, "Name": name} | ({"GroupName": group} if group is not None else {})
    shape = _model().operation_model(operation).input_shape
    assert shape is not None  # both operations take a body
    _check(shape, call, "")
    window = body.get("FlexibleTimeWindow") or {}
    if window.get("Mode") == "FLEXIBLE" and "MaximumWindowInMinutes" not in window:
        _refuse("MaximumWindowInMinutes is required when Mode is FLEXIBLE.")


def check_input(operation: str, members: dict[str, Any]) -> None:
    """Refuse (ValidationException) the given members of another call's input (ListSchedules'
    query: its State enum, its NamePrefix and group name patterns) as the model bounds them."""
    shape = _model().operation_model(operation).input_shape
    assert shape is not None
    for key, value in members.items():
        _check(shape.members[key], value, _join("", key))


def _check(shape: Shape, value: Any, path: str) -> None:
    """The model's constraints on `value`: required members, types, min/max (a string's
    length, a number's value), pattern (the whole string), enum."""
    kind, rules = shape.type_name, shape.metadata
    if kind == "structure":
        if not isinstance(value, dict):
            _refuse(f"Value at '{path}' failed to satisfy constraint: Member must be an object")
        for member in getattr(shape, "required_members", []):
            if value.get(member) is None:
                _violated(None, _join(path, member), "Member must not be null")
        members = getattr(shape, "members", {})
        for key, item in value.items():
            if key in members and item is not None:
                _check(members[key], item, _join(path, key))
        return
    if kind == "string":
        if not isinstance(value, str):
            _violated(value, path, "Member must be a string")
        size = "Member must have length"
        if "min" in rules and len(value) < rules["min"]:
            _violated(value, path, f"{size} greater than or equal to {rules['min']}")
        if "max" in rules and len(value) > rules["max"]:
            _violated(value, path, f"{size} less than or equal to {rules['max']}")
        if "pattern" in rules and not re.fullmatch(rules["pattern"], value, re.ASCII):
            _violated(value, path, f"Member must satisfy regular expression: {rules['pattern']}")
        enum = getattr(shape, "enum", None)  # a StringShape's, from the model
        if enum and value not in enum:
            _violated(value, path, f"Member must satisfy enum value set: {enum}")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            _violated(value, path, "Member must be an integer")
        size = "Member must have value"
        if "min" in rules and value < rules["min"]:
            _violated(value, path, f"{size} greater than or equal to {rules['min']}")
        if "max" in rules and value > rules["max"]:
            _violated(value, path, f"{size} less than or equal to {rules['max']}")


def _join(path: str, member: str) -> str:
    return f"{path}.{member[0].lower()}{member[1:]}" if path else member[0].lower() + member[1:]


def _violated(value: Any, path: str, constraint: str) -> NoReturn:
    _refuse(
        f"1 validation error detected: Value {value!r} at '{path}' failed to satisfy "
        f"constraint: {constraint}"
    )


def _refuse(message: str) -> NoReturn:
    raise SchedulerError("ValidationException", 400, message)
