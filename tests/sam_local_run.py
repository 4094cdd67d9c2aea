"""Running `sam local` for the tests in tests/test_sam_local.py, and reading its results:
the function's answer, the job rows, start-lambda's port, a boto3 Lambda client for it.

Why apart: the tests judge each run by the database and the answer's shape, never by
SAM's exit code (`sam local invoke` exits 0 when the handler fails); these are the few
ways they look, kept out of the tests themselves."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import psycopg

from infra import sam_local
from infra.sam_local_env import sam_environment


def sam_invoke(
    built: Path, image: str, function: str, event: Path, env_file: Path
) -> subprocess.CompletedProcess[str]:
    argv = [*sam_local.sam_argv("invoke", built, env_file, image), function, "-e", str(event)]
    env = sam_environment(built)
    return subprocess.run(
        argv, env=env, cwd=built.parent, capture_output=True, text=True, timeout=300
    )


def answer(done: subprocess.CompletedProcess[str]) -> Any:
    """The function's answer: the last line SAM prints on stdout."""
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr[-3000:]
    return json.loads(lines[-1])


def statuses(dsn: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        query = "SELECT status, count(*) FROM pgkick.jobs GROUP BY 1 ORDER BY 1"
        return [(str(s), int(n)) for s, n in conn.execute(query).fetchall()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def until_done(dsn: str, count: int, seconds: float = 120) -> list[tuple[str, int]]:
    """The jobs' statuses once all `count` are done, or as they are at the deadline."""
    deadline = time.monotonic() + seconds
    while (found := statuses(dsn)) != [("done", count)] and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


def lambda_client(endpoint: str) -> Any:
    config = botocore.config.Config(read_timeout=300, retries={"max_attempts": 0})
    return boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=config,
    )
