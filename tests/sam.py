"""SAM CLI and checkov, each in its own virtual environment (each pins its own boto3)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
VENV = ROOT / ".venv-sam"
REQUIREMENTS = ROOT / "infra" / "sam-requirements.txt"
CHECKOV_VENV = ROOT / ".venv-checkov"
CHECKOV_REQUIREMENTS = ROOT / "infra" / "checkov-requirements.txt"


def uv() -> list[str]:
    """uv as .ci/run has it: the command on PATH if it runs here, else python3 -m uv."""
    found = shutil.which("uv")
    if found and subprocess.run([found, "--version"], capture_output=True).returncode == 0:
        return [found]
    return [shutil.which("python3") or sys.executable, "-m", "uv"]


def ensure_venv(venv: Path, requirements: Path) -> Path:
    """Create or update a virtual environment from a requirements file; returns its bin."""
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "UV_PYTHON_DOWNLOADS": "never"}
    if not (venv / "bin" / "python").exists():
        subprocess.run([*uv(), "venv", "-q", "--python", "3.12", str(venv)], check=True, env=env)
    subprocess.run([*uv(), "pip", "install", "-q", "-r", str(requirements)], check=True, env=env)
    return venv / "bin"


def ensure_sam_venv() -> Path:
    """.venv-sam (SAM CLI, its translator, cfn-lint) and .venv-checkov, which
    infra/sam_checks.py runs; returns .venv-sam's bin folder."""
    ensure_venv(CHECKOV_VENV, CHECKOV_REQUIREMENTS)
    return ensure_venv(VENV, REQUIREMENTS)


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False, **kwargs
    )  # type: ignore[call-overload]
