"""`pgkick dev`'s settings, from its flags and the app's SAM template, as AWS deploys them:
0 is a value (reserved concurrency 0 throttles everything), a condition is evaluated with
the Parameters' Defaults, and a value AWS's deploy refuses is refused here in AWS's words
before anything starts. Each test fails if the stand-in is kinder than the deploy."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pgkick.cli.main import main
from pgkick_dev.devserver.flags import add_arguments, build_stack
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN
from pgkick_dev.devserver.settings import DEFAULTS, read_template
from pgkick_dev.devserver.stack import REAPER_HANDLER
from tests.devserver_fixtures import FUNCTION, ROOT, dev_stack

WORKER = """
Resources:
  WorkerFunction:
    Type: AWS::Serverless::Function
    Properties:
      Handler: pgkick.aws.worker.handler
{properties}
"""


def _template(tmp_path: Path, properties: str) -> Path:
    path = tmp_path / "template.yaml"
    path.write_text(WORKER.format(properties=properties))
    return path


def _stack(*argv: str) -> tuple[int, list[str]]:
    """The worker's cap and the banner, from `pgkick dev`'s own flags."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    stack, banner = build_stack(parser.parse_args(list(argv)), "postgresql://x@127.0.0.1/none")
    try:
        return next(iter(stack.functions.values())).pool.concurrency, banner
    finally:
        stack.close()


def test_pgkicks_own_template_matches_the_defaults_and_reserves_nothing() -> None:
    """Catches `!If` read as its true branch: pgkick's template reserves no concurrency with
    its Defaults (WorkerReservedConcurrency 0 makes ReserveConcurrency false), where the old
    reading took `!Ref WorkerReservedConcurrency`, 0, as a reservation."""
    read = read_template(ROOT / "template.yaml")
    assert read.concurrency is None and read.concurrency_unknown == ""
    assert {k: getattr(read, k) for k in DEFAULTS} == {**DEFAULTS, "allow_loops": True}
    cap, banner = _stack("--template", str(ROOT / "template.yaml"))
    assert cap == 4 and "cap 4 (no reservation: the local default)" in banner[0]


def test_the_deploys_parameter_values_are_the_stacks(tmp_path: Path) -> None:
    """Catches (note 59) a stand-in evaluated with the Defaults only: a team deploying with
    WorkerTimeout=900 and a reservation got 300 s and no cap locally. The values come from
    samconfig.toml beside the template (what `sam deploy` reads), then the flag; each is
    checked as CloudFormation checks it, in its words, before anything starts."""
    template = tmp_path / "template.yaml"
    template.write_text((ROOT / "template.yaml").read_text())
    given = ["--template", str(template), "--parameter-overrides"]
    cap, banner = _stack(*given, "WorkerTimeout=900", "WorkerReservedConcurrency=3")
    assert cap == 3 and "timeout 900 s" in banner[0] and "ReservedConcurrentExecutions" in banner[0]
    (tmp_path / "samconfig.toml").write_text(
        'version = 0.1\n[default.deploy.parameters]\nparameter_overrides = "KickMaxRetryAttempts=0 '
        'WorkerTimeout=600"\n'
    )
    _, banner = _stack("--template", str(template))
    assert "timeout 600 s" in banner[0] and "MaximumRetryAttempts 0" in banner[1]
    _, banner = _stack(*given, "WorkerTimeout=120")  # the flag over samconfig.toml
    assert "timeout 120 s" in banner[0] and "MaximumRetryAttempts 0" in banner[1]
    for value, said in (
        ("WorkerTimeout=901", "Parameter 'WorkerTimeout' must be a number not greater than 900"),
        ("WorkerTimeout=ten", "Parameter 'WorkerTimeout' must be a number."),
        ("LogLevel=TRACE", "Parameter 'LogLevel' must be one of AllowedValues"),
        ("Nope=1", "Parameters: [Nope] do not exist in the template"),
        ("WorkerTimeout", "'WorkerTimeout' is not Key=Value"),
    ):
        with pytest.raises(SystemExit, match=re.escape(said)):
            _stack(*given, value)


def test_the_templates_rules_refuse_half_a_vpc_config(tmp_path: Path) -> None:
    """Catches (note 60) SubnetIds given without SecurityGroupIds: deployed, the function's
    create fails and the stack rolls back, while the stand-in served it. The template's
    Rules refuse it before anything is created, and the stand-in evaluates them."""
    template = tmp_path / "template.yaml"
    template.write_text((ROOT / "template.yaml").read_text())
    given = ["--template", str(template), "--parameter-overrides"]
    for values, said in (
        (["SubnetIds=subnet-1"], "SubnetIds needs SecurityGroupIds"),
        (["SecurityGroupIds=sg-1"], "SecurityGroupIds without SubnetIds would be ignored"),
    ):
        with pytest.raises(SystemExit, match=said):
            _stack(*given, *values)
    _, banner = _stack(*given, "SubnetIds=subnet-1,subnet-2", "SecurityGroupIds=sg-1")
    assert any("SubnetIds=subnet-1,subnet-2" in line for line in banner)  # both: served


def test_the_worker_books_in_the_templates_schedule_group(tmp_path: Path) -> None:
    """Catches (note 59) a stack whose worker booked in "default" whatever the template: the
    deployed worker books in its PGKICK_SCHEDULE_GROUP, `!Ref WakeScheduleGroup`, named
    `${AWS::StackName}-wakes` (samconfig.toml's stack_name), the only group beside
    "default" that exists; without a stack name the group is unknown, and said."""
    template = tmp_path / "template.yaml"
    template.write_text((ROOT / "template.yaml").read_text())
    (tmp_path / "samconfig.toml").write_text(
        'version = 0.1\n[default.global.parameters]\nstack_name = "shop"\n'
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--template", str(template)])
    stack, banner = build_stack(args, "postgresql://x@127.0.0.1/none")
    try:
        stack.endpoint = "http://127.0.0.1:1"
        assert stack.scheduler.groups == {"default", "shop-wakes"}
        assert stack.runtime_env(FUNCTION, "e1")["PGKICK_SCHEDULE_GROUP"] == "shop-wakes"
        now = datetime.fromtimestamp(stack.clock.now(), UTC)
        stack.book(FUNCTION, "mail", now + timedelta(minutes=5), "wake", None)
        assert [s.group for s in stack.scheduler.list()] == ["shop-wakes"]
    finally:
        stack.close()
    (tmp_path / "samconfig.toml").unlink()
    stack, banner = build_stack(args, "postgresql://x@127.0.0.1/none")
    try:
        assert stack.scheduler.groups == {"default"}
        assert "schedule group WakeScheduleGroup unknown" in banner[1]
    finally:
        stack.close()


def test_a_failed_reaper_run_goes_to_the_queue_the_worker_drains(tmp_path: Path) -> None:
    """Catches (note 59) a reaper with no on-failure destination locally: the template sends
    a failed reaper run's record to FailedKicksQueue (the worker logs it), and without a
    template pgkick's template is what is deployed; a template without OnFailure has none."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for argv, expected in (
        (["--template", str(ROOT / "template.yaml")], LOCAL_DLQ_ARN),
        (["--template", str(tmp_path / "none.yaml")], LOCAL_DLQ_ARN),  # no template here
        (["--template", str(_template(tmp_path, "      Timeout: 60"))], None),
    ):
        stack, _ = build_stack(parser.parse_args(argv), "postgresql://x@127.0.0.1/none")
        try:
            reaper = next(s for s in stack.specs.values() if s.handler == REAPER_HANDLER)
            assert reaper.on_failure == expected, argv
        finally:
            stack.close()


def test_reserved_concurrency_zero_is_a_cap_of_zero(tmp_path: Path) -> None:
    """Catches `args.concurrency or template.concurrency or 4`: 0 from the template or from
    --concurrency became a cap of 4."""
    template = _template(tmp_path, "      ReservedConcurrentExecutions: 0")
    assert _stack("--template", str(template))[0] == 0
    assert _stack("--template", str(template), "--concurrency", "0")[0] == 0
    assert _stack("--template", str(template), "--concurrency", "3")[0] == 3
    unknown = _template(tmp_path, "      ReservedConcurrentExecutions: !GetAtt X.Y")
    cap, banner = _stack("--template", str(unknown))
    assert cap == 4 and "ReservedConcurrentExecutions unknown: !GetAtt" in banner[0]


def test_a_cap_of_zero_throttles_every_invocation() -> None:
    """As AWS: a synchronous invoke is throttled (429), an asynchronous one is accepted (202)
    and never run nor retried (it goes to the on-failure destination, if any)."""
    with dev_stack(concurrency=0) as dev:
        lam = dev.lambda_
        with pytest.raises(lam.exceptions.TooManyRequestsException):
            lam.invoke(FunctionName=FUNCTION, Payload=b"{}")
        assert lam.invoke(FunctionName=FUNCTION, InvocationType="Event")["StatusCode"] == 202
        dev.clock.advance(6 * 3600)
        queue = dev.stack.functions[FUNCTION]
        assert [k["why"] for k in queue.stats.failed_kicks] == [
            "reserved concurrency 0 (throttled, not retried)"
        ]
        assert "invoke_start" not in dev.kinds() and queue.idle()


@pytest.mark.parametrize(
    ("properties", "said"),
    [
        ("      Timeout: 3600", "Value '3600' at 'timeout' failed to satisfy constraint: "),
        (
            "      EventInvokeConfig:\n        MaximumEventAgeInSeconds: 10",
            "Value '10' at 'maximumEventAgeInSeconds' failed to satisfy constraint: Member must "
            "have value greater than or equal to 60",
        ),
        (
            "      EventInvokeConfig:\n        MaximumRetryAttempts: 5",
            "Value '5' at 'maximumRetryAttempts' failed to satisfy constraint: Member must have "
            "value less than or equal to 2",
        ),
        ("      MemorySize: 64", "Value '64' at 'memorySize'"),
    ],
)
def test_a_template_value_aws_refuses_is_refused_before_anything_starts(
    tmp_path: Path, properties: str, said: str
) -> None:
    """Catches the old stand-in running Timeout 3600, MaximumEventAgeInSeconds 10 and
    MaximumRetryAttempts 5 (its banner said 5, two retries ran) where the deploy fails."""
    template = _template(tmp_path, properties)
    data = tmp_path / "data"
    with pytest.raises(SystemExit, match="1 validation error detected") as refused:
        main(["dev", "--template", str(template), "--data-dir", str(data)])
    assert said in str(refused.value) and "AWS refuses it at deploy" in str(refused.value)
    assert not data.exists()  # no database started


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--timeout=5000", "Value '5000' at 'timeout'"),
        ("--max-event-age=30", "Value '30' at 'maximumEventAgeInSeconds'"),
        ("--max-event-age=0", "Value '0' at 'maximumEventAgeInSeconds'"),
        ("--max-retries=5", "Value '5' at 'maximumRetryAttempts'"),
        ("--concurrency=-1", "Value '-1' at 'reservedConcurrentExecutions'"),
    ],
)
def test_a_flag_aws_would_refuse_is_refused(
    flag: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `--max-event-age 0` silently replaced by the template's value, and flags out
    of AWS's ranges taken as they came."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args([flag])
    assert said in capsys.readouterr().err


def test_the_templates_log_level_is_obeyed_before_powertools_log_level() -> None:
    """Catches a stack that sets no AWS_LAMBDA_LOG_LEVEL, so POWERTOOLS_LOG_LEVEL decides
    locally while on AWS it does not. Source: Lambda Developer Guide, "Configuring advanced
    logging controls" (with LogFormat JSON, Lambda sets AWS_LAMBDA_LOG_FORMAT and
    AWS_LAMBDA_LOG_LEVEL from ApplicationLogLevel, INFO unless set) and Powertools'
    Logger._determine_log_level (AWS_LAMBDA_LOG_LEVEL before POWERTOOLS_LOG_LEVEL).
    pgkick's template maps LogLevel WARNING to Lambda's WARN (LambdaLogLevels)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = ["--template", str(ROOT / "template.yaml"), "--parameter-overrides", "LogLevel=WARNING"]
    stack, _ = build_stack(parser.parse_args(argv), "postgresql://x@127.0.0.1/none")
    stack.close()
    worker, reaper = stack.specs.values()
    wanted = {"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "WARN"}
    assert dict(worker.env) == wanted and dict(reaper.env) == wanted
    handler = "tests.devserver_handlers:logs_at_each_level"
    with dev_stack(handler, env={"POWERTOOLS_LOG_LEVEL": "DEBUG", **worker.env}) as dev:
        answer = dev.lambda_.invoke(FunctionName=FUNCTION, Payload=b"{}")
        assert json.loads(answer["Payload"].read()) == {"level": "WARNING"}
        said = [line for line in dev.logs if "-LINE" in line]
    assert len(said) == 1 and "WARNING-LINE" in said[0], said
