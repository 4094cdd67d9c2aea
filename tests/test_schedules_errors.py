"""`pgkick schedules sync` answers AWS's failures in one line saying what to do (issue 31.5).

Run as a real `pgkick` process, as an operator would: catches botocore's exceptions (no
credentials, an endpoint out of reach) escaping as tracebacks of 50-90 lines, exit 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = "arn:aws:lambda:us-east-1:123456789012:function:pgkick-worker"
ROLE = "arn:aws:iam::123456789012:role/pgkick-scheduler"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends


def _sync(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "jobs_nightly.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('cron(0 3 * * ? *)', task='nightly_sync_check')\n"
        "def nightly(payload): ...\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base.update(
        PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]),
        PGKICK_TASKS="jobs_nightly",
        PGKICK_WORKER_ARN=WORKER,
        PGKICK_SCHEDULER_ROLE_ARN=ROLE,
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_DEFAULT_REGION="us-east-1",
    )
    base.update(env)
    return subprocess.run(
        [str(Path(sys.executable).parent / "pgkick"), "schedules", "sync", "--dry-run"],
        env={k: v for k, v in base.items() if v},  # an empty value: the variable unset
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "pgkick schedules: no AWS credentials found (NoCredentialsError): set AWS_PROFILE"),
        (
            {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_ENDPOINT_URL_SCHEDULER": "http://127.0.0.1:{port}",
            },
            "pgkick schedules: cannot reach AWS scheduler at http://127.0.0.1:{port}",
        ),
        ({"AWS_DEFAULT_REGION": ""}, "pgkick schedules: no AWS region: set AWS_DEFAULT_REGION"),
    ],
    ids=["no-credentials", "unreachable-endpoint", "no-region"],
)
def test_an_aws_failure_is_one_line_saying_what_to_do(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    port = str(_closed_port())
    run = _sync(tmp_path, **{k: v.format(port=port) for k, v in env.items()})
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith(expected.format(port=port)), run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
