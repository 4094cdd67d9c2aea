"""What `pgkick dev` stands in for, read from the app's SAM template, then from flags.

Why the template: the stand-in must fail where the deploy fails, so the worker's
MaximumEventAgeInSeconds, MaximumRetryAttempts, RecursiveLoop, Timeout, MemorySize,
ReservedConcurrentExecutions, its on-failure destination, its AutoPublishAlias, the
BatchSize of its SQS event source and that queue's visibility and retention, the
reaper's on-failure destination and the schedule groups are the deployed ones, and a
value AWS refuses at deploy is refused here too, in AWS's words, before anything starts
(`SettingRefused`). The template is evaluated with the deploy's parameter values
(pgkick_dev.devserver.parameters) by pgkick_dev.devserver.intrinsics; an intrinsic that
cannot be evaluated is unknown, and the caller says so rather than guess. Without a
template, pgkick's own template's values (the one an app deploys) are used, except
RecursiveLoop, which is Lambda's default (Terminate) unless the template says Allow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgkick_dev.devserver import logging_config, parameters
from pgkick_dev.devserver.intrinsics import NO_VALUE, Template, Unknown, load

# pgkick's template.yaml defaults (tests/test_devserver_settings.py checks they match)
DEFAULTS: dict[str, Any] = {
    "max_event_age": 3600,
    "max_retries": 2,
    "timeout_s": 300,
    "allow_loops": False,
    "memory_mb": 512,
    "on_failure": "FailedKicksQueue",
    "reaper_on_failure": "FailedKicksQueue",
    "drain_batch": 5,
    "drain_visibility": 900,
    "drain_retention": 1_209_600,
    "log_env": logging_config.DEFAULT,
    "reaper_log_env": logging_config.DEFAULT,
}

# AWS's ranges, and the member name its deploy-time validation error names
LIMITS: dict[str, tuple[str, int, int | None]] = {
    "Timeout": ("timeout", 1, 900),
    "MemorySize": ("memorySize", 128, 10240),
    "MaximumEventAgeInSeconds": ("maximumEventAgeInSeconds", 60, 21600),
    "MaximumRetryAttempts": ("maximumRetryAttempts", 0, 2),
    "ReservedConcurrentExecutions": ("reservedConcurrentExecutions", 0, None),
    "BatchSize": ("batchSize", 1, 10000),
    "VisibilityTimeout": ("VisibilityTimeout", 0, 43200),
    "MessageRetentionPeriod": ("MessageRetentionPeriod", 60, 1_209_600),
}


class SettingRefused(ValueError):
    """A setting AWS's deploy refuses; the message is AWS's validation error."""


def refusal(setting: str, value: int) -> str | None:
    """AWS's validation error for `value` of `setting` (a LIMITS key), or None if valid."""
    member, low, high = LIMITS[setting]
    if value < low:
        bound = f"greater than or equal to {low}"
    elif high is not None and value > high:
        bound = f"less than or equal to {high}"
    else:
        return None
    return (
        f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy "
        f"constraint: Member must have value {bound}"
    )


def checked(setting: str, value: Any) -> int:
    """`value` as a whole number within AWS's range for `setting`, else SettingRefused."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SettingRefused(f"{setting}: {value!r} is not a whole number") from None
    said = refusal(setting, number)
    if said is not None:
        raise SettingRefused(f"{setting}: {said}")
    return number


@dataclass
class TemplateSettings:
    source: str  # where the values came from
    max_event_age: int
    max_retries: int
    timeout_s: int
    allow_loops: bool
    memory_mb: int = 512
    concurrency: int | None = None  # ReservedConcurrentExecutions; None: no reservation
    concurrency_unknown: str = ""  # why ReservedConcurrentExecutions could not be evaluated
    on_failure: str | None = None  # EventInvokeConfig.DestinationConfig.OnFailure's Destination
    aliases: tuple[str, ...] = ()  # AutoPublishAlias
    drain_batch: int = 10  # its SQS event source's BatchSize (FailedKicksQueue's records)
    reaper_on_failure: str | None = None  # the reaper's OnFailure destination, likewise
    schedule_groups: tuple[str, ...] = ()  # its AWS::Scheduler::ScheduleGroup names
    schedule_group: str = "default"  # the worker's PGKICK_SCHEDULE_GROUP
    drain_visibility: int = 30  # that queue's VisibilityTimeout: a record failed comes back
    drain_retention: int = 345_600  # ... and its MessageRetentionPeriod: then SQS deletes it
    # AWS_LAMBDA_LOG_FORMAT/LEVEL as Lambda sets them from LoggingConfig (worker, reaper)
    log_env: dict[str, str] = field(default_factory=dict)
    reaper_log_env: dict[str, str] = field(default_factory=dict)


def _setting(
    template: Template, props: dict[str, Any], name: str, default: int, notes: list[str]
) -> int:
    """The property's value, AWS's default when absent (or unknown: noted), else refused."""
    try:
        found = template.value(props.get(name, NO_VALUE))
    except Unknown as exc:
        notes.append(f"{name} unknown ({exc}): Lambda's default {default}")
        return default
    return default if found is NO_VALUE or found is None else checked(name, found)


def _destination(node: Any) -> str | None:
    """The on-failure destination, named for the banner (a !GetAtt names its resource)."""
    if node is None:
        return None
    if isinstance(node, dict) and "Fn::GetAtt" in node:
        target = node["Fn::GetAtt"]
        return str(target[0] if isinstance(target, list) else str(target).split(".")[0])
    return str(node)


def _drain(
    template: Template, props: dict[str, Any], resources: dict[str, Any], notes: list[str]
) -> dict[str, Any]:
    """The function's SQS event source (the failed kicks it drains): its BatchSize, and
    its queue's VisibilityTimeout and MessageRetentionPeriod, SQS's defaults where the
    template gives none (10, 30 s, 4 days); a visibility timeout shorter than the function's
    timeout is refused, as CreateEventSourceMapping refuses it."""
    found: dict[str, Any] = {}  # no SQS event source: the TemplateSettings' defaults
    for event in (props.get("Events") or {}).values():
        if not (isinstance(event, dict) and event.get("Type") == "SQS"):
            continue
        source = event.get("Properties") or {}
        found["drain_batch"] = _setting(template, source, "BatchSize", 10, notes)
        queue = source.get("Queue")
        target = queue.get("Fn::GetAtt") if isinstance(queue, dict) else None
        name = (
            (target[0] if isinstance(target, list) else str(target).split(".")[0])
            if target
            else None
        )
        queue_props = ((resources.get(name) or {}).get("Properties") or {}) if name else {}
        found["drain_visibility"] = _setting(template, queue_props, "VisibilityTimeout", 30, notes)
        found["drain_retention"] = _setting(
            template, queue_props, "MessageRetentionPeriod", 345_600, notes
        )
        timeout = _setting(template, props, "Timeout", 3, [])
        if found["drain_visibility"] < timeout:
            raise SettingRefused(
                f"Queue visibility timeout: {found['drain_visibility']} seconds is less than "
                f"Function timeout: {timeout} seconds"
            )
        break
    return found


def _reaper_on_failure(resources: dict[str, Any], globals_: dict[str, Any]) -> str | None:
    """The on-failure destination of the function whose Handler names the reaper: where a
    failed reaper run's record goes (the worker reads it: pgkick.aws.failed_kicks)."""
    for resource in resources.values():
        props = {**globals_, **(resource.get("Properties") or {})}
        if resource.get("Type") == "AWS::Serverless::Function" and "reaper" in str(
            props.get("Handler", "")
        ):
            invoke = props.get("EventInvokeConfig") or {}
            target = ((invoke.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
                "Destination"
            )
            return _destination(target)
    return None


def _schedule_groups(
    template: Template, props: dict[str, Any], globals_: dict[str, Any], notes: list[str]
) -> dict[str, Any]:
    """The template's schedule groups (AWS::Scheduler::ScheduleGroup) by name, and the one
    the worker books in (its PGKICK_SCHEDULE_GROUP, Globals' variables under its own)."""
    names: list[str] = []
    for logical_id, resource in template.resources.items():
        if isinstance(resource, dict) and resource.get("Type") == "AWS::Scheduler::ScheduleGroup":
            try:
                names.append(str(template.value({"Ref": logical_id})))
            except Unknown as exc:
                notes.append(f"schedule group {logical_id} unknown ({exc})")
    variables = {
        **((globals_.get("Environment") or {}).get("Variables") or {}),
        **(
            ((props.get("Environment") or {}) if isinstance(props, dict) else {}).get("Variables")
            or {}
        ),
    }
    group = "default"
    if "PGKICK_SCHEDULE_GROUP" in variables:
        try:
            group = str(template.value(variables["PGKICK_SCHEDULE_GROUP"]))
        except Unknown as exc:
            notes.append(f"PGKICK_SCHEDULE_GROUP unknown ({exc}): the default group")
    return {"schedule_groups": tuple(names), "schedule_group": group}


def read_template(
    path: Path | None, values: dict[str, str] | None = None, stack_name: str | None = None
) -> TemplateSettings:
    """The worker function's settings (the function whose Handler names the worker), the
    template evaluated with `values` for its parameters (the others: their Defaults).
    SettingRefused for a value AWS's deploy refuses."""
    if path is None or not path.exists():
        if values:
            raise SettingRefused(f"parameter values given but no template ({path}) to apply them")
        return TemplateSettings("pgkick's defaults (no template.yaml here)", **DEFAULTS)
    document = load(path)
    try:
        declared = parameters.applied(document.get("Parameters") or {}, values or {})
    except parameters.ParameterRefused as exc:
        raise SettingRefused(str(exc)) from None
    template = Template(
        declared,
        document.get("Conditions") or {},
        document.get("Resources") or {},
        stack_name,
        document.get("Mappings") or {},
    )
    try:
        broken = template.broken_rule(document.get("Rules") or {})
    except Unknown as exc:  # a rule beyond the evaluator: the deploy is the judge
        broken = None
        unreadable = f"Rules not checked here ({exc})"
    else:
        unreadable = ""
    if broken is not None:
        raise SettingRefused(broken)
    globals_ = (document.get("Globals") or {}).get("Function") or {}
    for logical_id, resource in (document.get("Resources") or {}).items():
        props = {**globals_, **(resource.get("Properties") or {})}
        if resource.get("Type") != "AWS::Serverless::Function" or "worker" not in str(
            props.get("Handler", "")
        ):
            continue
        invoke = props.get("EventInvokeConfig") or {}
        notes: list[str] = []
        reserved: int | None = None
        unknown = ""
        try:
            found = template.value(props.get("ReservedConcurrentExecutions", NO_VALUE))
            reserved = None if found is NO_VALUE else checked("ReservedConcurrentExecutions", found)
        except Unknown as exc:
            unknown = str(exc)
        on_failure = ((invoke.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
            "Destination"
        )
        try:
            alias = template.value(props.get("AutoPublishAlias", NO_VALUE))
        except Unknown as exc:
            notes.append(f"AutoPublishAlias unknown ({exc}): no alias")
            alias = NO_VALUE
        # Lambda's defaults where the template says nothing: 6 h, 2 retries, 3 s, 128 MB
        settings = TemplateSettings(
            f"{path} ({logical_id})",
            max_event_age=_setting(template, invoke, "MaximumEventAgeInSeconds", 21600, notes),
            max_retries=_setting(template, invoke, "MaximumRetryAttempts", 2, notes),
            timeout_s=_setting(template, props, "Timeout", 3, notes),
            allow_loops=str(props.get("RecursiveLoop", "Terminate")) == "Allow",
            memory_mb=_setting(template, props, "MemorySize", 128, notes),
            concurrency=reserved,
            concurrency_unknown=unknown,
            on_failure=_destination(on_failure),
            aliases=() if alias in (NO_VALUE, None, "") else (str(alias),),
            **_drain(template, props, document.get("Resources") or {}, notes),
            reaper_on_failure=_reaper_on_failure(document.get("Resources") or {}, globals_),
            **_schedule_groups(template, resource.get("Properties") or {}, globals_, notes),
        )
        try:
            settings.log_env = logging_config.lambda_log_env(template, props, notes)
            settings.reaper_log_env = logging_config.reaper_log_env(template, globals_, notes)
        except logging_config.LoggingRefused as exc:
            raise SettingRefused(f"LoggingConfig: {exc}") from None
        if unreadable:
            notes.append(unreadable)
        if values:
            notes.insert(0, "with " + " ".join(f"{k}={v}" for k, v in sorted(values.items())))
        if notes:
            settings.source += f"; {'; '.join(notes)}"
        return settings
    return TemplateSettings(f"pgkick's defaults (no worker function in {path})", **DEFAULTS)
