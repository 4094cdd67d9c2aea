"""SAM CLI in its own virtual environment (it pins an older boto3 than pgkick)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
VENV = ROOT / ".venv-sam"
REQUIREMENTS = ROOT / "infra" / "sam-requirements.txt"


def uv() -> list[str]:
    """uv as .ci/run has it: the command on PATH if it runs here, else python3 -m uv."""
    found = shutil.which("uv")
    if found and subprocess.run([found, "--version"], capture_output=True).returncode == 0:
        return [found]
    return [shutil.which("python3") or sys.executable, "-m", "uv"]


def ensure_sam_venv() -> Path:
    """Create or update .venv-sam from infra/sam-requirements.txt; returns its bin folder."""
    env = {**os.environ, "VIRTUAL_ENV": str(VENV), "UV_PYTHON_DOWNLOADS": "never"}
    if not (VENV / "bin" / "python").exists():
        subprocess.run([*uv(), "venv", "-q", "--python", "3.12", str(VENV)], check=True, env=env)
    subprocess.run([*uv(), "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True, env=env)
    return VENV / "bin"


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False, **kwargs
    )  # type: ignore[call-overload]
