"""What `pgkick dev` stands in for, read from the app's SAM template, then from flags.

Why the template: the stand-in must fail where the deploy fails, so the worker's
MaximumEventAgeInSeconds, MaximumRetryAttempts, RecursiveLoop, Timeout and
ReservedConcurrentExecutions are the deployed ones. Without a template, pgkick's
own template's values (the one an app deploys) are used, except RecursiveLoop,
which is Lambda's default (Terminate) unless the template says Allow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

# pgkick's template.yaml defaults (tests/test_devserver_settings.py checks they match)
DEFAULTS: dict[str, Any] = {
    "max_event_age": 3600,
    "max_retries": 2,
    "timeout_s": 300,
    "allow_loops": False,
}


class _Loader(yaml.SafeLoader):  # type: ignore[misc,unused-ignore]
    """CloudFormation's short tags (!Ref, !Sub, !If, ...) read as {"Ref": ...} dicts."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type,unused-ignore]
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _intrinsic)


@dataclass
class TemplateSettings:
    source: str  # where the values came from
    max_event_age: int
    max_retries: int
    timeout_s: int
    allow_loops: bool
    concurrency: int | None = None


def _resolve(value: Any, parameters: dict[str, Any]) -> Any:
    """A literal, or a !Ref to a parameter's Default; anything else (an !If...) is None."""
    if isinstance(value, dict):
        if "Ref" in value and value["Ref"] in parameters:
            return parameters[value["Ref"]].get("Default")
        if "Fn::If" in value:
            return _resolve(value["Fn::If"][1], parameters)  # the condition's true branch
        return None
    return value


def read_template(path: Path | None) -> TemplateSettings:
    """The worker function's settings (the function whose Handler names the worker)."""
    if path is None or not path.exists():
        return TemplateSettings("pgkick's defaults (no template.yaml here)", **DEFAULTS)
    template = yaml.load(path.read_text(), Loader=_Loader) or {}
    parameters = template.get("Parameters") or {}
    globals_ = (template.get("Globals") or {}).get("Function") or {}
    for logical_id, resource in (template.get("Resources") or {}).items():
        props = {**globals_, **(resource.get("Properties") or {})}
        if resource.get("Type") != "AWS::Serverless::Function" or "worker" not in str(
            props.get("Handler", "")
        ):
            continue
        invoke = props.get("EventInvokeConfig") or {}
        age = _resolve(invoke.get("MaximumEventAgeInSeconds"), parameters)
        retries = _resolve(invoke.get("MaximumRetryAttempts"), parameters)
        timeout = _resolve(props.get("Timeout"), parameters)
        reserved = _resolve(props.get("ReservedConcurrentExecutions"), parameters)
        return TemplateSettings(
            f"{path} ({logical_id})",
            max_event_age=int(age) if age is not None else 21600,  # Lambda's default: 6 h
            max_retries=int(retries) if retries is not None else 2,
            timeout_s=int(timeout) if timeout is not None else 3,  # Lambda's default: 3 s
            allow_loops=str(props.get("RecursiveLoop", "Terminate")) == "Allow",
            concurrency=int(reserved) if reserved is not None else None,
        )
    return TemplateSettings(f"pgkick's defaults (no worker function in {path})", **DEFAULTS)
