"""What an operator needs from the transformed template, checked (run by sam_checks.py).

Why: none of these is a CloudFormation error, so cfn-lint passes a template that
lacks them; each is a way a deployed pgkick goes wrong quietly: logs kept forever,
a failed kick or job nobody hears of, a reaper run retried into three database
connections, a stack that cannot deploy in an account with a low concurrency
quota, VPC permissions without a VPC (or with log writes on "*"), a permission the
code never uses, a role another account's service could be tricked into assuming, a
failed kick or dead wake-up nobody drains, a function that books wake-ups its role may
not. Each check names the rule (E9003-E9013) so a test can prove it fails on a template
without the item. The IAM rules (E9007-E9009: used actions, VPC permissions, trusts) and
the readers of resources and policies all of them share are in iam_checks.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# iam_checks.py sits beside this module, which sam_checks.py imports by its own name (infra/
# on sys.path, from .venv-sam) and the tests as infra.ops_checks: this folder goes on
# sys.path once, and iam_checks is imported by its own name in both.
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from iam_checks import iam_problems, resources_of_type, role_resources  # noqa: E402

DRAIN_ACTIONS = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
FAILED_KICKS = {"Fn::GetAtt": ["FailedKicksQueue", "Arn"]}
# A function given both books wake-ups (LambdaKicker._can_schedule: the reaper's kicks'
# safeties and its sweep's wake-ups, the worker's too), whatever its role allows. (An ARN
# in PGKICK_WORKER_FUNCTION would stand for the first; the template gives a name.)
SCHEDULES_WITH = ("PGKICK_WORKER_ARN", "PGKICK_SCHEDULER_ROLE_ARN")
WAKE_GROUP = "schedule/${WakeScheduleGroup}/*"
# (namespace, metric) of each alarm an operator needs; the dashboard shows each too.
ALARMED = {
    ("AWS/SQS", "ApproximateNumberOfMessagesVisible"): "the failed-kicks queue depth",
    ("AWS/Lambda", "Errors"): "worker errors",
    ("AWS/Lambda", "Throttles"): "worker throttles",
    ("pgkick", "failed"): "failed jobs",
    ("pgkick", "oldest_ready_age"): "the oldest ready job's age",
    ("AWS/Lambda", "AsyncEventsDropped"): "kicks Lambda dropped",
    ("AWS/Lambda", "AsyncEventAge"): "how long kicks wait in Lambda's queue",
    ("AWS/Scheduler", "InvocationDroppedCount"): "wake-ups Scheduler dropped",
}


def log_problems(template: dict[str, Any]) -> list[str]:
    groups = resources_of_type(template, "AWS::Logs::LogGroup")
    problems = []
    for name, function in resources_of_type(template, "AWS::Lambda::Function").items():
        logging = function.get("LoggingConfig", {})
        group = logging.get("LogGroup", {})
        ref = group.get("Ref") if isinstance(group, dict) else None
        if logging.get("LogFormat") != "JSON":
            problems.append(f"E9003 {name}: LoggingConfig LogFormat is not JSON")
        elif "ApplicationLogLevel" not in logging:  # Lambda's INFO, then: LogLevel ignored
            problems.append(f"E9003 {name}: LoggingConfig without ApplicationLogLevel")
        if ref not in groups or "RetentionInDays" not in groups[ref]:
            problems.append(f"E9003 {name}: logs not in a log group of the stack with retention")
    return problems


def _alarmed_metrics(alarm: dict[str, Any]) -> set[tuple[str, str]]:
    found = {(alarm.get("Namespace", ""), alarm.get("MetricName", ""))}
    for query in alarm.get("Metrics", []):
        metric = query.get("MetricStat", {}).get("Metric", {})
        found.add((metric.get("Namespace", ""), metric.get("MetricName", "")))
    return found


def alarm_problems(template: dict[str, Any]) -> list[str]:
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm").values()
    alarmed = {m for alarm in alarms if alarm.get("AlarmActions") for m in _alarmed_metrics(alarm)}
    problems = [
        f"E9004 no alarm (with an action) on {what}"
        for metric, what in ALARMED.items()
        if metric not in alarmed
    ]
    dashboards = resources_of_type(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps([d.get("DashboardBody") for d in dashboards])
    problems += [
        f"E9010 the dashboard does not show {what} ({metric})"
        for (_, metric), what in ALARMED.items()
        if f'\\"{metric}\\"' not in body
    ]
    return problems


def reaper_problems(template: dict[str, Any]) -> list[str]:
    """A failed reaper run waits for the next tick: a retry is one more connection (and
    one more suspend window awake); its failure goes somewhere an operator looks."""
    for config in resources_of_type(template, "AWS::Lambda::EventInvokeConfig").values():
        if config.get("FunctionName") == {"Ref": "ReaperFunction"}:
            on_failure = config.get("DestinationConfig", {}).get("OnFailure", {})
            if config.get("MaximumRetryAttempts") != 0 or not on_failure.get("Destination"):
                return ["E9005 ReaperFunction: needs MaximumRetryAttempts 0 and OnFailure"]
            return []
    return ["E9005 ReaperFunction: no EventInvokeConfig (a failed run is retried twice)"]


def concurrency_problems(template: dict[str, Any]) -> list[str]:
    """Reserved concurrency must be optional: an account whose quota leaves less than
    100 unreserved cannot deploy a reservation at all."""
    problems = []
    for name, function in resources_of_type(template, "AWS::Lambda::Function").items():
        reserved = function.get("ReservedConcurrentExecutions")
        if reserved is None:
            continue
        branches = reserved.get("Fn::If") if isinstance(reserved, dict) else None
        if not branches or branches[2] != {"Ref": "AWS::NoValue"}:
            problems.append(f"E9006 {name}: ReservedConcurrentExecutions is not optional (Fn::If)")
        elif (parameter := _reserved_by(template, branches[0])) is None:
            problems.append(f"E9006 {name}: reservation's condition is not `parameter != 0`")
        elif template.get("Parameters", {}).get(parameter, {}).get("Default") != 0:
            problems.append(f"E9006 {name}: {parameter} reserves by default (make it 0)")
    parameter = template.get("Parameters", {}).get("WorkerReservedConcurrency", {})
    if parameter.get("MinValue") != 0 or parameter.get("MaxValue", 1000) > 900:
        problems.append("E9006 WorkerReservedConcurrency: MinValue 0 (unreserved), MaxValue 900")
    return problems


def _reserved_by(template: dict[str, Any], condition: str) -> str | None:
    """The parameter P of a condition `!Not [!Equals [!Ref P, 0]]`, else None."""
    found = template.get("Conditions", {}).get(condition, {})
    try:
        left, right = found["Fn::Not"][0]["Fn::Equals"]
        return str(left["Ref"]) if right in (0, "0") else None
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def failed_kicks_problems(template: dict[str, Any]) -> list[str]:
    """Failed kicks and dead wake-ups come back as runs: the worker drains FailedKicksQueue
    (an SQS event source, a small batch, per-record failures) with scoped permissions; the
    wake role may dead-letter into it (each booking names it: scheduling_problems)."""
    problems = []
    mappings = [
        m
        for m in resources_of_type(template, "AWS::Lambda::EventSourceMapping").values()
        if m.get("FunctionName") == {"Ref": "WorkerFunction"}
        and m.get("EventSourceArn") == FAILED_KICKS
    ]
    if not mappings:
        problems.append("E9011 WorkerFunction: no SQS event source on FailedKicksQueue")
    for mapping in mappings:
        if "ReportBatchItemFailures" not in mapping.get("FunctionResponseTypes", []):
            problems.append("E9011 WorkerFunction: SQS source without ReportBatchItemFailures")
        if not 1 <= int(mapping.get("BatchSize", 10)) <= 10:
            problems.append("E9011 WorkerFunction: SQS source batch larger than 10")
    granted = role_resources(template, "WorkerFunctionRole")
    for action in sorted(DRAIN_ACTIONS):
        if granted.get(action) != FAILED_KICKS:
            problems.append(f"E9011 WorkerFunctionRole: {action} not on FailedKicksQueue alone")
    queue = resources_of_type(template, "AWS::SQS::Queue").get("FailedKicksQueue", {})
    if int(queue.get("VisibilityTimeout", 30)) < 900:  # Lambda refuses less than the timeout
        problems.append("E9011 FailedKicksQueue: VisibilityTimeout below the worker's max 900 s")
    if role_resources(template, "WakeRole").get("sqs:SendMessage") != FAILED_KICKS:
        problems.append("E9012 WakeRole: cannot dead-letter wake-ups into FailedKicksQueue")
    return problems


def scheduling_problems(template: dict[str, Any]) -> list[str]:
    """Each function whose environment lets it book wake-ups (SCHEDULES_WITH) may: its role
    creates schedules in the wake group and passes Scheduler the role it names, and its
    bookings name the dead-letter queue. Without that, every booking is AccessDenied on
    AWS while the function reports its queues woken (the reaper's, before E9013)."""
    problems = []
    for name, function in resources_of_type(template, "AWS::Lambda::Function").items():
        variables = function.get("Environment", {}).get("Variables", {})
        if not all(variables.get(v) for v in SCHEDULES_WITH):
            continue
        role = str(function.get("Role", {}).get("Fn::GetAtt", ["?"])[0])
        granted = role_resources(template, role)
        if WAKE_GROUP not in json.dumps(granted.get("scheduler:CreateSchedule")):
            problems.append(f"E9013 {name}: books wake-ups; {role} may not create them")
        if granted.get("iam:PassRole") != variables["PGKICK_SCHEDULER_ROLE_ARN"]:
            problems.append(f"E9013 {name}: books wake-ups; {role} may not pass the wake role")
        if variables.get("PGKICK_SCHEDULE_DLQ_ARN") != FAILED_KICKS:
            problems.append(f"E9013 {name}: PGKICK_SCHEDULE_DLQ_ARN is not FailedKicksQueue")
    return problems


def all_problems(template: dict[str, Any]) -> list[str]:
    return (
        log_problems(template)
        + alarm_problems(template)
        + reaper_problems(template)
        + concurrency_problems(template)
        + iam_problems(template)
        + failed_kicks_problems(template)
        + scheduling_problems(template)
    )
