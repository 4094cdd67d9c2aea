"""`sam local invoke` on Linux, as the README writes it: Docker, AWS's base image,
`--add-host host.docker.internal:host-gateway`, infra/env.linux.json, and
infra/docker_bridge.py in front of a PostgreSQL on loopback. Skipped, with the reason
printed, where there is no Docker daemon or no base image (pulling needs internet)."""

from __future__ import annotations

import contextlib
import json
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from infra import docker_bridge
from tests.helpers import seed
from tests.sam import ROOT, run
from tests.store import JobStore
from tests.test_sam import build_dir, sam_bin  # noqa: F401  (shared fixtures)

ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
BASE_IMAGE = f"public.ecr.aws/lambda/python:3.12-{ARCH.get(platform.machine().lower(), '?')}"


def docker_unavailable() -> str | None:
    """Why `sam local invoke` cannot run here, or None when it can."""
    if shutil.which("docker") is None:
        return "no docker command"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if info.returncode != 0:
        return "no Docker daemon: " + " ".join(info.stderr.split())[-200:]
    image = subprocess.run(
        ["docker", "image", "inspect", BASE_IMAGE], capture_output=True, check=False
    )
    if image.returncode != 0:
        return f"{BASE_IMAGE} is not here and cannot be pulled without internet"
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """Skips (reason printed) before the build is made for nothing."""
    reason = docker_unavailable()
    if reason is not None:
        pytest.skip(f"sam local invoke not run: {reason}")


@contextlib.contextmanager
def bridge_port(dsn: str) -> Iterator[int]:
    """infra/docker_bridge.py forwarding the bridge's gateway (a free port) to the server."""
    address = docker_bridge.bridge_gateway()
    with socket.socket() as probe:
        probe.bind((address, 0))
        port = int(probe.getsockname()[1])
    target = urlsplit(dsn)
    process = subprocess.Popen(
        [
            sys.executable,
            "infra/docker_bridge.py",
            "--to",
            f"127.0.0.1:{target.port}",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and "forwarding" in process.stdout.readline()
    yield port
    process.terminate()
    process.wait(timeout=10)


def test_env_linux_json_differs_from_env_json_only_in_the_address() -> None:
    """The Linux env file is the other one with the database reached through the bridge
    (and a connect timeout): catches the two drifting apart in anything else."""
    default = json.loads((ROOT / "infra" / "env.json").read_text())
    linux = json.loads((ROOT / "infra" / "env.linux.json").read_text())
    url = linux["Parameters"].pop("DATABASE_URL")
    default["Parameters"].pop("DATABASE_URL")
    assert linux == default
    assert urlsplit(url).hostname == "host.docker.internal" and urlsplit(url).port == 5432


def test_sam_local_invoke_on_linux_drains_jobs(
    docker_ready: None,
    build_dir: Path,  # noqa: F811
    sam_bin: Path,  # noqa: F811
    dsn: str,
    tmp_path: Path,
) -> None:
    """The README's Linux recipe drains real jobs in AWS's container: catches a container
    that cannot resolve host.docker.internal or reach the database. Never ran here (no
    daemon, no image): a skip, printed, is what this machine shows."""
    with JobStore.open(dsn) as store:
        seed(store, 20)
    linux = json.loads((ROOT / "infra" / "env.linux.json").read_text())
    with bridge_port(dsn) as port:
        url = urlsplit(linux["Parameters"]["DATABASE_URL"])
        database = urlsplit(dsn).path
        linux["Parameters"]["DATABASE_URL"] = url._replace(
            netloc=f"postgres:pgkick@host.docker.internal:{port}", path=database
        ).geturl()
        env = tmp_path / "env.linux.json"
        env.write_text(json.dumps(linux))
        done = run(
            [
                *(str(sam_bin / "sam"), "local", "invoke", "WorkerFunction"),
                *("-t", str(build_dir / "template.yaml"), "-e", "infra/events/kick.json"),
                *("--env-vars", str(env), "--add-host", "host.docker.internal:host-gateway"),
                "--skip-pull-image",
            ],
            timeout=600,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT status, count(*) FROM pgkick.jobs GROUP BY 1").fetchall() == [
            ("done", 20)
        ]
