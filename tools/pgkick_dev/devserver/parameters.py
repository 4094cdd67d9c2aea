"""The template's parameter values `pgkick dev` evaluates it with: the deploy's, not only
the Defaults.

Why: a team that deploys with `WorkerTimeout=900` or `KickMaxRetryAttempts=0` (samconfig.toml's
`parameter_overrides`, or `sam deploy --parameter-overrides`) would otherwise get the
Defaults' 300 s and 2 retries locally, a stand-in other than what runs. The values come
from samconfig.toml's `[default.deploy.parameters] parameter_overrides`, then from
`pgkick dev --parameter-overrides`, and are checked as CloudFormation checks them before
anything is created (a name the template does not declare, a Number that is not one,
MinValue/MaxValue, AllowedValues, AllowedPattern, MinLength/MaxLength), in its words.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any


class ParameterRefused(ValueError):
    """A parameter value CloudFormation refuses; the message is its validation error."""


def parse(items: list[str] | str, source: str) -> dict[str, str]:
    """`Key=Value` items (SAM's form; a string is split as a shell splits it)."""
    words = shlex.split(items) if isinstance(items, str) else list(items)
    values: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ParameterRefused(f"{source}: {word!r} is not Key=Value")
        values[key] = value
    return values


def from_samconfig(path: Path) -> dict[str, str]:
    """samconfig.toml's deploy parameter_overrides (what `sam deploy` uses), if any."""
    if not path.exists():
        return {}
    try:
        config = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ParameterRefused(f"{path}: not TOML ({exc})") from None
    deploy = ((config.get("default") or {}).get("deploy") or {}).get("parameters") or {}
    given = deploy.get("parameter_overrides")
    if given is None:
        return {}
    if not isinstance(given, (str, list)):
        raise ParameterRefused(f"{path}: parameter_overrides is neither a string nor a list")
    return parse(given, f"{path} parameter_overrides")


def stack_name(path: Path) -> str | None:
    """samconfig.toml's stack_name (global, else deploy parameters): ${AWS::StackName}."""
    if not path.exists():
        return None
    try:
        config = tomllib.loads(path.read_text()).get("default") or {}
    except tomllib.TOMLDecodeError as exc:
        raise ParameterRefused(f"{path}: not TOML ({exc})") from None
    for section in ("global", "deploy"):
        name = ((config.get(section) or {}).get("parameters") or {}).get("stack_name")
        if isinstance(name, str) and name:
            return name
    return None


def _refusal(name: str, declared: dict[str, Any], value: str) -> str | None:
    """CloudFormation's error for `value` of parameter `name`, or None if it is accepted."""
    kind = str(declared.get("Type", "String"))
    if kind == "Number":
        try:
            number = float(value)
        except ValueError:
            return f"Parameter '{name}' must be a number."
        if "MinValue" in declared and number < float(declared["MinValue"]):
            return f"Parameter '{name}' must be a number not less than {declared['MinValue']}"
        if "MaxValue" in declared and number > float(declared["MaxValue"]):
            return f"Parameter '{name}' must be a number not greater than {declared['MaxValue']}"
    allowed = declared.get("AllowedValues")
    if allowed is not None and value not in [str(a) for a in allowed]:
        return f"Parameter '{name}' must be one of AllowedValues"
    if "MinLength" in declared and len(value) < int(declared["MinLength"]):
        return f"Parameter '{name}' must contain at least {declared['MinLength']} characters"
    if "MaxLength" in declared and len(value) > int(declared["MaxLength"]):
        return f"Parameter '{name}' must contain at most {declared['MaxLength']} characters"
    pattern = declared.get("AllowedPattern")
    if pattern is not None and re.fullmatch(str(pattern), value) is None:
        said = declared.get("ConstraintDescription") or f"Must match pattern {pattern}"
        return f"Parameter {name} failed to satisfy constraint: {said}"
    return None


def applied(declared: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """The template's Parameters with each given value as its Default (what the evaluator
    reads); ParameterRefused, in CloudFormation's words, for one it would refuse."""
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise ParameterRefused(f"Parameters: [{', '.join(unknown)}] do not exist in the template")
    result = dict(declared)
    for name, value in values.items():
        said = _refusal(name, declared[name] or {}, value)
        if said is not None:
            raise ParameterRefused(said)
        result[name] = {**(declared[name] or {}), "Default": value}
    return result
