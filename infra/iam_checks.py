"""The stack's IAM, checked for what pgkick needs and no more (E9007-E9009; run by
sam_checks.py through ops_checks.all_problems), and the readers of the template's
resources and policies every check shares.

Why its own rules: a permission the code never uses, VPC permissions without a VPC (or
log writes on "*"), a PassRole to any service and a trust another account's service could
be tricked into are all valid CloudFormation, so cfn-lint passes them; each widens what a
leaked role can do, quietly.
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
    "secretsmanager:GetSecretValue",  # the database secret (pgkick/config/app.py)
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "sqs:SendMessage",  # Lambda's on-failure destination, Scheduler's dead letters
    # the worker's SQS event source on FailedKicksQueue (what Lambda's poller calls)
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
# Lambda's network interfaces, in VPC mode only (the managed policy's, less its logs).
VPC_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}
VPC_POLICY = "AWSLambdaVPCAccessExecutionRole"  # grants logs:* on "*": not used


def resources_of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """Each resource of type `kind`, by logical name: its Properties ({} without)."""
    return {
        name: resource.get("Properties", {})
        for name, resource in template.get("Resources", {}).items()
        if resource.get("Type") == kind
    }


def inline_policies(properties: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """(the condition it is under, or None; the policy) for each inline policy."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for policy in properties.get("Policies", []):
        if "Fn::If" in policy:
            condition, yes, no = policy["Fn::If"]
            found += [(str(condition), b) for b in (yes, no) if "PolicyDocument" in b]
        else:
            found.append((None, policy))
    return found


def policy_statements(properties: dict[str, Any]) -> list[dict[str, Any]]:
    docs = [p["PolicyDocument"] for _, p in inline_policies(properties)]
    docs += [properties["PolicyDocument"]] if "PolicyDocument" in properties else []
    return [s for doc in docs for s in doc["Statement"]]


def statement_actions(statement: dict[str, Any]) -> list[str]:
    found = statement.get("Action", [])
    return [found] if isinstance(found, str) else list(found)


def role_resources(template: dict[str, Any], role: str) -> dict[str, Any]:
    """action -> resource for each statement of a role."""
    properties = resources_of_type(template, "AWS::IAM::Role").get(role, {})
    return {
        a: s.get("Resource") for s in policy_statements(properties) for a in statement_actions(s)
    }


def iam_problems(template: dict[str, Any]) -> list[str]:
    problems = []
    roles = resources_of_type(template, "AWS::IAM::Role")
    policies = roles | resources_of_type(template, "AWS::IAM::ManagedPolicy")
    in_vpc = {  # the conditions under which the functions get a VpcConfig
        str(config["Fn::If"][0])
        for function in resources_of_type(template, "AWS::Lambda::Function").values()
        if isinstance(config := function.get("VpcConfig"), dict) and "Fn::If" in config
    }
    for name, properties in policies.items():
        if VPC_POLICY in json.dumps(properties.get("ManagedPolicyArns")):
            problems.append(f"E9007 {name}: {VPC_POLICY} grants log writes on *: own policy")
        for condition, policy in inline_policies(properties):
            for statement in policy["PolicyDocument"]["Statement"]:
                ec2 = [a for a in statement_actions(statement) if a in VPC_ACTIONS]
                if ec2 and condition not in in_vpc:
                    problems.append(f"E9007 {name}: {ec2[0]} without the VpcConfig's condition")
        for statement in policy_statements(properties):
            for action in statement_actions(statement):
                if action.startswith("logs:") and statement.get("Resource") == "*":
                    problems.append(f"E9007 {name}: {action} on *, not on its own log group")
                if action not in USED_ACTIONS | VPC_ACTIONS:
                    problems.append(f"E9008 {name}: {action} is not used by pgkick")
                passed = statement.get("Condition", {}).get("StringEquals", {})
                if action == "iam:PassRole" and passed.get("iam:PassedToService") != (
                    "scheduler.amazonaws.com"
                ):
                    problems.append(f"E9008 {name}: iam:PassRole without iam:PassedToService")
    worker = roles.get("WorkerFunctionRole", {})
    worker_actions = {a for st in policy_statements(worker) for a in statement_actions(st)}
    if worker and "scheduler:DeleteSchedule" not in worker_actions:
        problems.append("E9008 WorkerFunctionRole: cannot delete its rescue schedule")
    groups = set(resources_of_type(template, "AWS::Scheduler::ScheduleGroup"))
    for name, properties in roles.items():
        for statement in properties.get("AssumeRolePolicyDocument", {}).get("Statement", []):
            problems += _trust_problems(name, statement, groups)
    return problems


def _trust_problems(name: str, statement: dict[str, Any], groups: set[str]) -> list[str]:
    """Every trust names the account; Scheduler sends aws:SourceAccount and aws:SourceArn
    (its confused-deputy page), so their absence must refuse: StringEquals, not IfExists,
    and the source pinned to a schedule group. Lambda documents neither key for execution
    roles, so IfExists is allowed there."""
    conditions = statement.get("Condition", {})
    if not any("aws:SourceAccount" in c for c in conditions.values()):
        return [f"E9009 {name}: trust without an aws:SourceAccount condition"]
    if statement.get("Principal", {}).get("Service") != "scheduler.amazonaws.com":
        return []
    problems = []
    if "aws:SourceAccount" not in conditions.get("StringEquals", {}):
        problems.append(f"E9009 {name}: Scheduler sends aws:SourceAccount: use StringEquals")
    arns = {**conditions.get("ArnEquals", {}), **conditions.get("ArnLike", {})}
    source = arns.get("aws:SourceArn")
    group = isinstance(source, dict) and source.get("Fn::GetAtt", [""])[0] in groups
    if not group and ":schedule-group/" not in json.dumps(source):
        problems.append(f"E9009 {name}: aws:SourceArn not pinned to a schedule group")
    return problems
