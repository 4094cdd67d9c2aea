"""What an operator needs from the transformed template, checked (run by sam_checks.py).

Why: none of these is a CloudFormation error, so cfn-lint passes a template that
lacks them; each is a way a deployed pgkick goes wrong quietly: logs kept forever,
a failed kick or job nobody hears of, a reaper run retried into three database
connections, a stack that cannot deploy in an account with a low concurrency
quota, VPC permissions without a VPC, a permission the code never uses, a role
another account's service could be tricked into assuming. Each check names the
rule (E9003-E9010) so a test can prove it fails on a template without the item.
"""

from __future__ import annotations

import json
from typing import Any

# Every action the code calls (grep functions/ for boto3 calls), plus what Lambda's
# runtime itself writes (logs, the on-failure destination). Anything else is unused.
USED_ACTIONS = {
    "lambda:InvokeFunction",  # kicks (kick.py) and the wake role
    "scheduler:CreateSchedule",  # wake-ups and rescues (kick.py)
    "scheduler:DeleteSchedule",  # the worker's rescue, deleted when it ends cleanly (rescue.py)
    "iam:PassRole",  # the wake role, handed to Scheduler with each schedule
    "secretsmanager:GetSecretValue",  # the database secret (config.py)
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "sqs:SendMessage",  # Lambda's on-failure destination
}
VPC_POLICY = "AWSLambdaVPCAccessExecutionRole"
# (namespace, metric) of each alarm an operator needs; the dashboard shows each too.
ALARMED = {
    ("AWS/SQS", "ApproximateNumberOfMessagesVisible"): "the failed-kicks queue depth",
    ("AWS/Lambda", "Errors"): "worker errors",
    ("AWS/Lambda", "Throttles"): "worker throttles",
    ("pgkick", "failed"): "failed jobs",
    ("pgkick", "oldest_ready_age"): "the oldest ready job's age",
}


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {
        name: resource.get("Properties", {})
        for name, resource in template.get("Resources", {}).items()
        if resource.get("Type") == kind
    }


def log_problems(template: dict[str, Any]) -> list[str]:
    groups = _of_type(template, "AWS::Logs::LogGroup")
    problems = []
    for name, function in _of_type(template, "AWS::Lambda::Function").items():
        logging = function.get("LoggingConfig", {})
        group = logging.get("LogGroup", {})
        ref = group.get("Ref") if isinstance(group, dict) else None
        if logging.get("LogFormat") != "JSON":
            problems.append(f"E9003 {name}: LoggingConfig LogFormat is not JSON")
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
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    alarmed = {m for alarm in alarms if alarm.get("AlarmActions") for m in _alarmed_metrics(alarm)}
    problems = [
        f"E9004 no alarm (with an action) on {what}"
        for metric, what in ALARMED.items()
        if metric not in alarmed
    ]
    dashboards = _of_type(template, "AWS::CloudWatch::Dashboard").values()
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
    for config in _of_type(template, "AWS::Lambda::EventInvokeConfig").values():
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
    for name, function in _of_type(template, "AWS::Lambda::Function").items():
        reserved = function.get("ReservedConcurrentExecutions")
        if reserved is None:
            continue
        branches = reserved.get("Fn::If") if isinstance(reserved, dict) else None
        if not branches or branches[2] != {"Ref": "AWS::NoValue"}:
            problems.append(f"E9006 {name}: ReservedConcurrentExecutions is not optional (Fn::If)")
    parameter = template.get("Parameters", {}).get("WorkerReservedConcurrency", {})
    if parameter.get("MinValue") != 0 or parameter.get("MaxValue", 1000) > 900:
        problems.append("E9006 WorkerReservedConcurrency: MinValue 0 (unreserved), MaxValue 900")
    return problems


def _statements(properties: dict[str, Any]) -> list[dict[str, Any]]:
    docs = [p["PolicyDocument"] for p in properties.get("Policies", [])]
    docs += [properties["PolicyDocument"]] if "PolicyDocument" in properties else []
    return [s for doc in docs for s in doc["Statement"]]


def _actions(statement: dict[str, Any]) -> list[str]:
    found = statement.get("Action", [])
    return [found] if isinstance(found, str) else list(found)


def iam_problems(template: dict[str, Any]) -> list[str]:
    problems = []
    roles = _of_type(template, "AWS::IAM::Role")
    policies = roles | _of_type(template, "AWS::IAM::ManagedPolicy")
    in_vpc = {  # the conditions under which the functions get a VpcConfig
        str(config["Fn::If"][0])
        for function in _of_type(template, "AWS::Lambda::Function").values()
        if isinstance(config := function.get("VpcConfig"), dict) and "Fn::If" in config
    }
    for name, properties in policies.items():
        managed = properties.get("ManagedPolicyArns")
        condition = managed.get("Fn::If", [None])[0] if isinstance(managed, dict) else None
        if VPC_POLICY in json.dumps(managed) and condition not in in_vpc:
            problems.append(f"E9007 {name}: {VPC_POLICY} without the VpcConfig's condition")
        for statement in _statements(properties):
            for action in _actions(statement):
                if action not in USED_ACTIONS:
                    problems.append(f"E9008 {name}: {action} is not used by pgkick")
                passed = statement.get("Condition", {}).get("StringEquals", {})
                if action == "iam:PassRole" and passed.get("iam:PassedToService") != (
                    "scheduler.amazonaws.com"
                ):
                    problems.append(f"E9008 {name}: iam:PassRole without iam:PassedToService")
    worker = roles.get("WorkerFunctionRole", {})
    worker_actions = {a for st in _statements(worker) for a in _actions(st)}
    if worker and "scheduler:DeleteSchedule" not in worker_actions:
        problems.append("E9008 WorkerFunctionRole: cannot delete its rescue schedule")
    for name, properties in roles.items():
        for statement in properties.get("AssumeRolePolicyDocument", {}).get("Statement", []):
            conditions = statement.get("Condition", {}).values()
            if not any("aws:SourceAccount" in c for c in conditions):
                problems.append(f"E9009 {name}: trust without an aws:SourceAccount condition")
    return problems


def all_problems(template: dict[str, Any]) -> list[str]:
    return (
        log_problems(template)
        + alarm_problems(template)
        + reaper_problems(template)
        + concurrency_problems(template)
        + iam_problems(template)
    )
