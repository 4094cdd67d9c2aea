"""Whether a task function takes the job's context, read from its signature once.

Why not "two parameters or more": the worker calls `fn(payload, job)` or `fn(payload)`,
and a second parameter that is an option of the task's own (`*, dry_run=False`,
`retries=3`) is not a slot for the context. Counting them failed the first every attempt
(a keyword-only parameter given positionally) and handed the second a JobContext as its
`retries`. So the context goes to a second parameter that is positional and required, or
annotated `JobContext`, or `*args`; a positional one with a default of its own is
ambiguous, and a function the worker could not call at all (a third required parameter) is
refused where the task is declared, saying how to declare it, not at every attempt.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pgkick.errors import InvalidArgumentType
from pgkick.tasks.context import JobContext

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def takes_context(name: str, fn: Callable[..., Any]) -> bool:
    """True when the worker calls `fn(payload, job)`, False for `fn(payload)`; an
    InvalidArgumentType naming task `name` for a signature it cannot call either way."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    if not params or params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        wants = len(params) >= 2  # (*args, **kwargs): a wrapper passing both on, as before
    elif len(params) == 1:
        wants = False
    else:
        wants = _second(name, params[1], _is_context(fn, params[1]))
    try:
        signature.bind(None, None) if wants else signature.bind(None)
    except TypeError as exc:
        raise InvalidArgumentType(
            f"task {name!r}: {getattr(fn, '__name__', fn)}() has parameters the worker cannot "
            f"pass ({exc}): it is called with the payload and, as a second positional "
            f"parameter, the JobContext; give the others defaults"
        ) from None
    return wants


def _second(name: str, param: inspect.Parameter, is_context: bool) -> bool:
    if param.kind is inspect.Parameter.VAR_POSITIONAL:
        return True
    if param.kind in POSITIONAL:
        if param.default is inspect.Parameter.empty or is_context:
            return True
        raise InvalidArgumentType(
            f"task {name!r}: its second parameter {param.name!r} has a default, so pgkick "
            f"cannot tell whether it is the job's context: declare it "
            f"`{param.name}: pgkick.JobContext` to receive the context, or make it "
            f"keyword-only (`*, {param.name}={param.default!r}`) to keep its default"
        )
    if is_context:  # keyword-only or **kwargs: the worker passes the context positionally
        raise InvalidArgumentType(
            f"task {name!r}: the JobContext parameter {param.name!r} must be the second "
            f"positional parameter (`def task(payload, {param.name}: pgkick.JobContext)`)"
        )
    return False


def _is_context(fn: Callable[..., Any], param: inspect.Parameter) -> bool:
    """Whether `param` is annotated JobContext (or JobContext | None)."""
    try:
        hint = typing.get_type_hints(fn).get(param.name)
    except Exception:  # an unresolvable forward reference: read the annotation's text
        return "JobContext" in str(param.annotation)
    return hint is JobContext or JobContext in typing.get_args(hint)
