"""SAM CLI and checkov, each in its own virtual environment (each pins its own boto3)."""

from __future__ import annotations

import fcntl
import os
import platform
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
    """Create or update a virtual environment from a requirements file; returns its bin.
    Under a lock file beside it: the suite's two pytest-xdist workers may both need it
    first on a fresh clone, and two creations of one venv at once break it."""
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "UV_PYTHON_DOWNLOADS": "never"}
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (venv / "bin" / "python").exists():
            create = [*uv(), "venv", "-q", "--python", "3.12", str(venv)]
            subprocess.run(create, check=True, env=env)
        install = [*uv(), "pip", "install", "-q", "-r", str(requirements)]
        subprocess.run(install, check=True, env=env)
    return venv / "bin"


def ensure_sam_venv() -> Path:
    """.venv-sam (SAM CLI, its translator, cfn-lint) and .venv-checkov, which
    infra/sam_checks.py runs; returns .venv-sam's bin folder."""
    ensure_venv(CHECKOV_VENV, CHECKOV_REQUIREMENTS)
    return ensure_venv(VENV, REQUIREMENTS)


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("VIRTUAL_ENV", None)
    kwargs.setdefault("cwd", ROOT)
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, **kwargs)  # type: ignore[call-overload]


# Lambda's name for each machine this can run on (platform.machine()).
LAMBDA_ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
TEMPLATE_ARCHITECTURE = "    Architectures: [{}]\n"


def machine_architecture() -> str:
    """This machine's Lambda architecture: what a built artifact must be to run here."""
    return LAMBDA_ARCHITECTURES[platform.machine().lower()]


def project_copy(dest: Path, architecture: str | None = None) -> Path:
    """What `sam build` reads (template, samconfig.toml, functions/, infra/) copied to
    `dest`, the template's architecture set to `architecture` if given: the template
    deploys arm64, and a build the tests run here (x86_64) must be this machine's."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("template.yaml", "samconfig.toml"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("functions", "infra"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    if architecture is not None:
        set_architecture(dest / "template.yaml", architecture)
    return dest


def set_architecture(template: Path, architecture: str) -> None:
    """Rewrite the template's one `Architectures:` line (Globals) to `architecture`."""
    text = template.read_text()
    (line,) = [x + "\n" for x in text.splitlines() if x.startswith("    Architectures: [")]
    template.write_text(text.replace(line, TEMPLATE_ARCHITECTURE.format(architecture)))
