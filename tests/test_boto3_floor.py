"""pgkick's AWS calls made by boto3 and botocore at the floor pgkick declares (1.34.32).

Why: Lambda's runtime provides boto3 (the artifact packages none), so pgkick runs
against whatever version the runtime has, never older than the floor in pyproject. The
floor was read off botocore's service models by hand; this runs the calls. botocore
validates every parameter against its own models before sending, so a call using a
parameter (or an operation) that 1.34.32 does not know fails here, client side, whatever
the endpoint. The endpoint is moto (the project's version, in the same fresh venv:
moto answers beneath botocore's HTTP layer, after the floor's botocore validated and
serialised each call), so the old botocore also parses the answers: the kick's 202, a
ConflictException, a ResourceNotFoundException.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.sam import ROOT, uv
from tests.test_artifact import BOTO3_FLOOR

FLOOR = ".".join(map(str, BOTO3_FLOOR))
MOTO = importlib.metadata.version("moto")  # the project's (uv.lock)

CALLS = """
import io, json, sys, zipfile
from datetime import UTC, datetime, timedelta

import boto3, botocore
from moto import mock_aws

with mock_aws(config={"lambda": {"use_docker": False}}):
    from pgkick import config
    from pgkick.aws import schedules
    from pgkick.awsapi.boto import aws_client
    from pgkick.kick.lambda_kicker import LambdaKicker
    from pgkick.tasks.recurring import Periodic

    assert "site-packages" in boto3.__file__ and "site-packages" in config.__file__
    trust = {"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                            "Principal": {"Service": "lambda.amazonaws.com"}}]}
    role = boto3.client("iam").create_role(
        RoleName="pgkick-worker", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as zipped:
        zipped.writestr("worker/app.py", "def handler(event, context):\\n    return event\\n")
    function_arn = boto3.client("lambda").create_function(
        FunctionName="pgkick-worker", Runtime="python3.12", Role=role,
        Handler="worker.app.handler", Code={"ZipFile": code.getvalue()})["FunctionArn"]
    group = "pgkick-wakes"
    boto3.client("scheduler").create_schedule_group(Name=group)
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name="pgkick-db", SecretString=json.dumps({"url": "postgresql://u:p@db/app"}))["ARN"]
    role_arn = "arn:aws:iam::123456789012:role/pgkick-wake"

    kicker = LambdaKicker("pgkick-worker", function_arn=function_arn,
                          scheduler_role_arn=role_arn, schedule_group=group)
    kicker.kick("default", "enqueue")  # lambda.Invoke, InvocationType Event: 202 or it raises
    when = datetime.now(UTC) + timedelta(hours=1)
    kicker.book_rescue("default", when, "pgkick-rescue-1")  # scheduler.CreateSchedule
    kicker.book_rescue("default", when, "pgkick-rescue-1")  # its ConflictException, parsed
    kicker.wake_at("default", when + timedelta(minutes=5))
    kicker.cancel_rescue("pgkick-rescue-1")  # scheduler.DeleteSchedule
    kicker.cancel_rescue("pgkick-rescue-1")  # its ResourceNotFoundException, parsed
    client = aws_client("scheduler", 5.0)
    plans = []
    for declared in (
        [Periodic("nightly", "cron(0 3 * * ? *)", "UTC", "report", "default")],
        [Periodic("nightly", "cron(0 4 * * ? *)", "UTC", "report", "default")],
        [],
    ):  # `pgkick schedules sync`: create, update, delete
        plan = schedules.sync(client, declared, target_arn=function_arn, role_arn=role_arn,
                              group=group, prune_all=not declared)
        plans.append({key: names for key, names in plan.items() if names})
    dsn = config.database_url({"PGKICK_DATABASE_SECRET_ARN": secret_arn})  # GetSecretValue
    left = client.list_schedules(GroupName=group)["Schedules"]
    print(json.dumps({
        "boto3": boto3.__version__,
        "botocore": botocore.__version__,
        "plans": plans,
        "dsn": dsn,
        "left": sorted(s["Name"] for s in left),
    }))
"""


@pytest.fixture(scope="module")
def floor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv: the runtime wheel (with its lambda extra) and boto3 at the floor."""
    folder = tmp_path_factory.mktemp("boto3-floor")
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    built = subprocess.run(
        [*uv(), "build", "-q", "--wheel", "--out-dir", str(folder / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (folder / "dist").glob("pgkick-*.whl")
    venv = folder / "venv"
    subprocess.run([*uv(), "venv", "-q", "--python", "3.12", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [
            *uv(),
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            f"pgkick[lambda] @ {wheel.as_uri()}",
            f"boto3=={FLOOR}",
            f"botocore=={FLOOR}",  # boto3 1.34.32 admits any botocore 1.34.x: pin the floor's
            f"moto[awslambda,scheduler,secretsmanager]=={MOTO}",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert installed.returncode == 0, installed.stderr
    return python


def test_pgkicks_aws_calls_run_on_the_boto3_floor(floor_python: Path, tmp_path: Path) -> None:
    """Every AWS call pgkick makes, from the installed wheel with boto3 and botocore
    1.34.32: the kick (lambda.Invoke, Event), a rescue booked twice and cancelled twice,
    a wake-up, `pgkick schedules sync` creating, updating and deleting, and the database
    secret read through Powertools. Catches a call or parameter newer than the floor
    (botocore refuses it before sending: raise the floor, and check Lambda's runtime has
    it) and an error code the old botocore names otherwise."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),  # no ~/.aws of the machine's
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = subprocess.run(
        [str(floor_python), "-I", "-c", CALLS],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["boto3"], result["botocore"]) == (FLOOR, FLOOR)
    assert result["plans"] == [
        {"created": ["pgkick.periodic.nightly"]},
        {"updated": ["pgkick.periodic.nightly"]},
        {"deleted": ["pgkick.periodic.nightly"]},
    ]
    assert result["dsn"] == "postgresql://u:p@db/app"
    assert len(result["left"]) == 1 and result["left"][0].startswith("pgkick-")  # the wake-up
