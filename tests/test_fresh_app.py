"""A new user's app, outside the repository, following the docs literally (issue #27).

Each step runs in a subprocess in a temporary folder, with no checkout on the path:
the install block of docs/getting-started/install.md as written (the two wheels built
with `uv build`, a venv, pip with --find-links), the testing guide's task, test module and
conftest.py as the page shows them (inline mode and assert_enqueued, manual mode, the app's
table created in the template), run by the venv's own pytest
against the embedded PostgreSQL the tooling brings; then the demo from that venv,
which needs the tooling and nothing of the development environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.sam import ROOT, uv

INSTALL_PAGE = ROOT / "docs" / "getting-started" / "install.md"
MARK = "<!-- tests/test_fresh_app.py runs this block as written -->"

TESTING_PAGE = ROOT / "docs" / "guide" / "testing.md"

# What the test adds to the guide's own test module: the fixture it uses is the installed
# wheel's, and a job run inline is still found, done, by assert_enqueued.
TESTS = """
import pgkick
from myapp import tasks


def test_pgkick_is_the_installed_wheel():
    assert "site-packages" in pgkick.__file__, pgkick.__file__


def test_a_job_run_inline_is_done(pgkick_inline):
    tasks.checkout(42)
    job = pgkick_inline.assert_enqueued(tasks.send_receipt, payload={"order": 42}, queue="mail")
    assert job["status"] == "done"
"""


def guide_files() -> dict[str, str]:
    """The testing guide's files as the page shows them, each block headed `# path`:
    the app's task module, its test module and its conftest.py."""
    blocks = re.findall(r"```python\n(# [\w/]+\.py\n.*?)```", TESTING_PAGE.read_text(), re.S)
    files = {block.splitlines()[0][2:]: block for block in blocks}
    assert {"myapp/tasks.py", "tests/test_checkout.py", "conftest.py"} <= files.keys()
    return files


def install_block() -> str:
    """The shell block the install page marks as tested, as written there."""
    text = INSTALL_PAGE.read_text()
    after = text[text.index(MARK) + len(MARK) :]
    match = re.match(r"\s*```sh\n(.*?)```", after, re.DOTALL)
    assert match, f"{INSTALL_PAGE}: no ```sh block after the test's mark"
    return match.group(1)


def _env(app: Path, **extra: str) -> dict[str, str]:
    """What a user's shell has (this machine's certificates and pip settings, PATH with
    `python3.12` and `uv`), without what this suite or uv set: no PYTHONPATH, no
    DATABASE_URL, no VIRTUAL_ENV, no PGKICK_*."""
    shims = app.parent / "bin"
    shims.mkdir(exist_ok=True)
    python312 = shims / "python3.12"  # pyenv's shim answers 3.12 only inside the checkout
    if not python312.exists():
        python312.symlink_to(sys.executable)
    uv_command = uv()
    if len(uv_command) == 1 and not (shims / "uv").exists():
        (shims / "uv").symlink_to(uv_command[0])
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    user = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PGKICK_", "UV_", "PYTEST_", "AWS_"))
        and name not in {"PYTHONPATH", "DATABASE_URL", "VIRTUAL_ENV", "PYTHONHOME"}
    }
    return {**user, "PATH": path, **extra}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An app folder with the docs' install done, its task and its tests written."""
    root = tmp_path_factory.mktemp("fresh")
    app = root / "app"
    app.mkdir()
    env = _env(app, PGKICK=str(ROOT), DIST=str(root / "dist"), UV_PYTHON_DOWNLOADS="never")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", install_block()],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (app / "myapp").mkdir()
    (app / "myapp" / "__init__.py").write_text("")
    (app / "tests").mkdir()
    for path, text in guide_files().items():  # the guide's own, not a copy that may drift
        (app / path).write_text(text)
    (app / "tests" / "test_installed.py").write_text(TESTS)
    return app


@pytest.mark.slow
def test_a_fresh_app_installs_by_the_docs_and_tests_its_task_with_the_plugin(app: Path) -> None:
    """Catches (#27, defects 1 and 4): install commands that do not work as written (the
    tooling's pgkick[lambda] not found next to it), and an app unable to test its task
    without copying pgkick's own conftest (no fixtures shipped, no migrated database)."""
    version = subprocess.run(
        [str(app / ".venv" / "bin" / "pgkick"), "--version"],
        cwd=app,
        env=_env(app),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert version.stdout.strip() == "pgkick 0.1.0, pgkick-dev 0.1.0", version.stderr
    done = subprocess.run(  # the testing guide's command: python -m pytest, PGKICK_TASKS
        [str(app / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=app,
        env=_env(app, PGKICK_TASKS="myapp.tasks"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
def test_the_apps_job_is_shown_by_pgkick_jobs_and_pgkick_job(app: Path, dsn: str) -> None:
    """Catches (#27, defect 3) no command that lists or shows jobs: from the app's folder
    and its venv, `pgkick enqueue` of the app's task, then `pgkick jobs` lists it and
    `pgkick job ID` shows its payload, with no checkout on the path."""
    pgkick = str(app / ".venv" / "bin" / "pgkick")

    def run(*argv: str) -> dict[str, Any]:
        done = subprocess.run(
            [pgkick, *argv, "--dsn", dsn, "--json"],
            cwd=app,
            env=_env(app, PGKICK_TASKS="myapp.tasks", PGKICK_KICKER="none"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    job_id = run("enqueue", "send_receipt", "--payload", '{"order": 7}', "--queue", "mail")["id"]
    listed = run("jobs", "--task", "send_receipt")
    assert [job["id"] for job in listed["jobs"]] == [job_id]
    shown = run("job", str(job_id))
    assert shown["payload"] == {"order": 7} and shown["queue"] == "mail", shown


@pytest.mark.slow
def test_the_demo_runs_from_the_tooling_alone(app: Path) -> None:
    """Catches the demo needing the development environment (moto, mypy, Django, the peer
    queues...): here only pgkick, pgkick-dev and pytest are installed."""
    site = subprocess.run(
        [str(app / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        cwd=app,
        env=_env(app),
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.lower()
    assert "moto==" not in site and "mypy==" not in site and "procrastinate==" not in site
    out = Path(tempfile.mkdtemp(prefix="pgkick-fresh-demo-"))  # under /tmp: the server's
    out.chmod(0o755)  # OS user (root runs it as postgres) must reach its data folder
    try:
        demo = ["demo", "--jobs", "100", "--window", "1", "--no-compare", "--json"]
        done = subprocess.run(
            [str(app / ".venv" / "bin" / "pgkick"), *demo, "--out", str(out)],
            cwd=app,
            env=_env(app),
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert '"ok": true' in done.stdout


def test_the_readmes_first_install_is_the_tested_one() -> None:
    """Catches the README's first app section showing `pip install pgkick[django]`, which
    no index serves, while the way that works came sections later without a command."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Using it from an app") :]
    installs = [line for line in section.splitlines() if "pip install" in line]
    commands = {line.split("#")[0].strip() for line in install_block().splitlines()}
    assert installs and "--find-links" in installs[0]
    assert {line.split("#")[0].strip() for line in installs[:2]} <= commands
