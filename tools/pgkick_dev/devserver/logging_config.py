"""The log variables Lambda sets in a function's environment from its `LoggingConfig`.

Why the stand-in must set them: with `LogFormat: JSON`, Lambda sets
`AWS_LAMBDA_LOG_FORMAT=JSON` and `AWS_LAMBDA_LOG_LEVEL` to the `ApplicationLogLevel` (INFO
when the template gives none), and both Lambda's runtime client (awslambdaric) and
Powertools' Logger obey that level before `POWERTOOLS_LOG_LEVEL` (Lambda Developer Guide,
"Configuring advanced logging controls"; Powertools' `_determine_log_level`). A stack that
left them unset let `POWERTOOLS_LOG_LEVEL` decide, kinder than AWS: a WARNING deploy
printed INFO lines locally. With the Text format (Lambda's default) the application log
level cannot be set, and Lambda sets no level. The values are the template's, evaluated
as deployed (pgkick_dev.devserver.intrinsics: `!FindInMap [LambdaLogLevels, !Ref LogLevel,
Name]`); a level outside the API's enum is refused as the deploy refuses it.
"""

from __future__ import annotations

from typing import Any

from pgkick_dev.devserver.intrinsics import NO_VALUE, Template, Unknown

# the model's ApplicationLogLevel enum (botocore's lambda service-2.json)
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
# pgkick's template: JSON, its LogLevel's Default INFO (a test keeps them equal)
DEFAULT = {"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "INFO"}


class LoggingRefused(ValueError):
    """A LoggingConfig the deploy refuses; the message is AWS's validation error."""


def lambda_log_env(template: Template, props: dict[str, Any], notes: list[str]) -> dict[str, str]:
    """AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL as Lambda sets them for a function
    whose properties are `props` (Globals' merged in); {} for the Text format. An
    ApplicationLogLevel that cannot be evaluated is noted and Lambda's default (INFO) used."""
    config = props.get("LoggingConfig") or {}
    try:
        log_format = template.value(config.get("LogFormat", NO_VALUE))
    except Unknown as exc:
        notes.append(f"LogFormat unknown ({exc}): Lambda's default, Text")
        return {}
    if log_format != "JSON":  # Text, or none: no application log level exists
        return {}
    try:
        level = template.value(config.get("ApplicationLogLevel", NO_VALUE))
    except Unknown as exc:
        notes.append(f"ApplicationLogLevel unknown ({exc}): Lambda's default, INFO")
        level = NO_VALUE
    level = "INFO" if level is NO_VALUE or level is None else str(level)
    if level not in LEVELS:
        raise LoggingRefused(
            f"1 validation error detected: Value '{level}' at "
            "'loggingConfig.applicationLogLevel' failed to satisfy constraint: Member must "
            f"satisfy enum value set: [{', '.join(LEVELS)}]"
        )
    return {"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": level}


def reaper_log_env(
    template: Template, globals_: dict[str, Any], notes: list[str]
) -> dict[str, str]:
    """The log variables of the function whose Handler names the reaper ({} if none)."""
    for resource in template.resources.values():
        props = {**globals_, **(resource.get("Properties") or {})}
        if resource.get("Type") == "AWS::Serverless::Function" and "reaper" in str(
            props.get("Handler", "")
        ):
            return lambda_log_env(template, props, notes)
    return {}
