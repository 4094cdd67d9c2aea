"""Typed payloads: a dataclass or pydantic model as the JSON a row holds, and back.

Why a trip to check, not two functions that look like inverses: the producer dumps and a
worker, minutes later, rebuilds; a payload type whose dump cannot be rebuilt (a computed
field passed back to `__init__`, a model dumped by field name and validated by alias)
fails every attempt of every job, and its data with it. So:

- a dataclass is rebuilt from the fields its `__init__` takes (a `field(init=False)` is
  computed again), its nested dataclasses too (alone, in a list or a dict, or optional),
  read from the field types; a field no rebuild can read (an `InitVar`, which is never
  stored; a union of two dataclasses) is refused where the task is declared;
- a pydantic model is dumped by alias, without computed fields (`round_trip=True`);
- the handle rebuilds each typed payload from its JSON before writing it, and refuses one
  that does not survive (pgkick.tasks.handle), nothing written.

A stored payload that does not fit (a job enqueued by name, an older producer) fails its
attempt with an error naming the type and the payload's keys, never its values: an error
is logged and kept in `last_error`.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any

from pgkick.errors import InvalidArgumentType

Loader = Callable[[Any], Any]


def to_json_value(payload: object) -> object:
    """A dataclass or pydantic model as plain JSON values; anything else unchanged."""
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return dataclasses.asdict(payload)
    dump = getattr(payload, "model_dump", None)  # pydantic v2, without importing it
    if callable(dump) and not isinstance(payload, type):
        return dump(mode="json", by_alias=True, round_trip=True)
    return payload


def payload_loader(fn: Callable[..., Any], name: str = "") -> Loader | None:
    """How to turn a stored payload back into the type `fn`'s first parameter declares.

    None when it declares a plain type (dict, TypedDict, Any): the JSON value is it.
    A dataclass no payload could be rebuilt as is an InvalidArgumentType naming task `name`."""
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # a forward reference that cannot be resolved: no conversion
        return None
    declared = hints.get(params[0].name)
    if not isinstance(declared, type):
        return None
    try:
        rebuild = _rebuilder(declared, declared.__qualname__)
    except TypeError as exc:
        raise InvalidArgumentType(f"task {name!r}: {exc}") from None
    if rebuild is None:
        return None
    return _fitting(declared, rebuild)


def survives(payload: object, value: object, load: Loader) -> str | None:
    """Why `value` (the JSON of `payload`) cannot be rebuilt by `load`, None when it can.
    Not JSON at all: None, the enqueue's own checks refuse it naming where."""
    try:
        stored = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None
    try:
        load(stored)
    except Exception as exc:
        return str(exc)
    return None


def _rebuilder(hint: Any, where: str) -> Loader | None:
    """A function rebuilding a JSON value as `hint`, None when the JSON value is it.
    `where` names the field for the error of a type no rebuild can read (a TypeError)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    validate = getattr(hint, "model_validate", None)  # pydantic v2, without importing it
    if isinstance(hint, type) and callable(validate):
        return validate  # type: ignore[no-any-return]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    inner = [_rebuilder(arg, where) for arg in args]
    if not any(inner):
        return None
    if origin is list and len(args) == 1 and inner[0]:
        each = inner[0]
        return lambda value: [each(item) for item in value]
    if origin is dict and len(args) == 2 and inner[1] and not inner[0]:
        each = inner[1]
        return lambda value: {key: each(item) for key, item in value.items()}
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        one = next(r for r in inner if r)  # X | None: the one that is not None
        return lambda value: None if value is None else one(value)
    raise InvalidArgumentType(
        f"{where} is {hint}, which a stored payload cannot be rebuilt as (nested dataclasses "
        f"and models are rebuilt alone, in list[X], dict[str, X] or X | None); declare it "
        f"as one of these, or the payload as a pydantic model"
    )


def _dataclass(cls: type) -> Loader:
    """`cls` from its `__init__` fields, their nested dataclasses rebuilt first."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a forward reference that cannot be resolved: rebuilt flat
        hints = {}
    for name, hint in hints.items():
        if isinstance(hint, dataclasses.InitVar):
            raise InvalidArgumentType(
                f"{cls.__qualname__} declares InitVar {name!r}, which is never stored "
                f"(dataclasses.asdict leaves it out), so no job could rebuild it; make it a "
                f"field"
            )
    fields = {f.name: f for f in dataclasses.fields(cls)}
    computed = {name for name, f in fields.items() if not f.init}
    nested = {
        name: rebuild
        for name, f in fields.items()
        if f.init and (rebuild := _rebuilder(hints.get(name), f"{cls.__qualname__}.{name}"))
    }

    def load(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise InvalidArgumentType(
                f"{cls.__qualname__} is built from an object, got {type(value)}"
            )
        kept = {key: item for key, item in value.items() if key not in computed}
        for key, rebuild in nested.items():
            if key in kept:
                kept[key] = rebuild(kept[key])
        return cls(**kept)

    return load


def _fitting(cls: type, rebuild: Loader) -> Loader:
    """`rebuild`, its failures an error that says the payload does not fit `cls`, by keys.
    The bare errors named only `__init__`'s missing argument, or quoted each bad value
    (pydantic's `input_value=...`). Retried as any error is: a worker deployed before its
    producer may be the one out of date."""

    def load(value: Any) -> Any:
        try:
            return rebuild(value)
        except (TypeError, ValueError, AttributeError) as exc:
            shape = f"keys {sorted(value)}" if isinstance(value, dict) else type(value).__name__
            raise InvalidArgumentType(
                f"payload ({shape}) does not fit {cls.__qualname__}, the task's payload type: "
                f"{_why(exc)}"
            ) from None

    return load


def _why(exc: BaseException) -> str:
    """The failure without the values: pydantic's errors by place and kind only."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or 'payload'}: {error['type']}"
        for error in errors(include_url=False, include_input=False, include_context=False)
    )
