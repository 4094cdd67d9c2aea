"""The example app deploys pgkick's handlers with its own tasks: `sam build` of its own
template builds it, and the built worker, behind Lambda's Runtime Interface Emulator
with awslambdaric, runs the app's task on a real job."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from infra import rie_invoke
from tests.sam import ROOT, ensure_sam_venv, machine_architecture, run, set_architecture, uv
from tests.store import JobStore

EXAMPLE = ROOT / "examples" / "orders"


def test_the_example_template_is_pgkicks_own_with_an_apps_changes() -> None:
    """Catches the example's template drifting from the one this repository deploys and
    checks (alarms, roles, the rescue's permissions...)."""
    done = run(["python3", "examples/derive_template.py", "--check"])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def example_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sam = ensure_sam_venv() / "sam"
    app = tmp_path_factory.mktemp("example") / "orders"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("vendor", ".aws-sam"))
    # The template deploys arm64 (SAM's builder resolves psycopg-binary's aarch64 wheel for
    # it: README, Deploy); the emulator here runs this machine's architecture only.
    set_architecture(app / "template.yaml", machine_architecture())
    wheel = subprocess.run(
        [*uv(), "build", "-q", "--wheel", "--out-dir", str(app / "app" / "vendor"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert wheel.returncode == 0, wheel.stderr
    built = subprocess.run(
        [str(sam), "build", "--build-dir", str(app / ".aws-sam" / "build")],
        capture_output=True,
        text=True,
        cwd=app,
        env={**rie_invoke_env(), "SAM_CLI_TELEMETRY": "0"},
        timeout=900,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return app / ".aws-sam" / "build"


def rie_invoke_env() -> dict[str, str]:
    import os

    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.mark.slow
def test_the_example_apps_built_worker_runs_its_own_task(
    example_build: Path, dsn: str, tmp_path: Path
) -> None:
    """Catches a team unable to deploy its own tasks: handlers not importable from the
    installed package, the app's module not on the worker's path, or pgkick's wheel
    missing from the artifact; the unknown-task path would fail the job instead."""
    code = example_build / "WorkerFunction"
    assert (code / "pgkick" / "aws" / "worker.pyc").exists()  # the wheel's: sourceless
    assert (code / "orders_app" / "tasks.py").exists()
    assert not (code / "pgkick_dev").exists()
    with JobStore.open(dsn) as store:
        store.conn.execute(
            "INSERT INTO pgkick.jobs (queue, task, payload) VALUES ('default', 'send_receipt', %s)",
            [json.dumps({"order": 42})],
        )
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"Parameters": {"DATABASE_URL": dsn, "PGKICK_KICKER": "none"}}))
    ric_dir = rie_invoke.runtime_client_dir(tmp_path / "runtime-client")
    rie = rie_invoke.rie_binary()
    assert ric_dir is not None and rie is not None
    with rie_invoke.Emulator(
        "WorkerFunction", build_dir=example_build, env_file=env, ric_dir=ric_dir, rie=rie
    ) as worker:
        answer = worker.invoke({"queue": "default", "reason": "enqueue"})
    assert answer.error_type is None, answer.payload
    assert answer.payload["done"] == 1, answer.payload
    assert "receipt for order 42" in answer.logs
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT status FROM pgkick.jobs").fetchall() == [("done",)]


def test_the_example_apps_artifact_is_pgkicks_lean_one(example_build: Path) -> None:
    """The app's build is pgkick's (build/build_artifact.py): no boto3 (Lambda's runtime
    has it; SAM's own builder shipped it, 52 MB for arm64), no vendor/ folder of wheels,
    everything precompiled, within 15 MiB. Catches the example back on SAM's builder."""
    code = example_build / "WorkerFunction"
    for absent in ("boto3", "botocore", "s3transfer", "dateutil", "vendor", "pgkick_dev"):
        assert not (code / absent).exists(), absent
    assert (code / "orders_app" / "__pycache__" / "tasks.cpython-312.pyc").exists()
    size = sum(path.stat().st_size for path in code.rglob("*") if path.is_file())
    assert size < 15 * 2**20, f"{size / 2**20:.2f} MiB"
