"""pgkick as a new user meets it: the built wheels installed into a fresh virtual
environment, no checkout on sys.path, a database migrated, a job enqueued and run."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import psycopg
import pytest

from tests.sam import ROOT, uv

ENQUEUE = """
import json, sys, time
import psycopg, pgkick
dsn = sys.argv[1]
assert "site-packages" in pgkick.__file__, pgkick.__file__  # the wheel, not the checkout
try:
    job = pgkick.enqueue_and_kick({"n": 1}, task="noop", dsn=dsn)
except pgkick.PgkickError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    sys.exit(0)
deadline = time.monotonic() + 60
with psycopg.connect(dsn, autocommit=True) as conn:
    while time.monotonic() < deadline:  # waits for the outcome; the test asserts on it
        (status,) = conn.execute("SELECT status FROM pgkick.jobs WHERE id = %s", [job]).fetchone()
        if status in ("done", "failed"):
            break
        time.sleep(0.05)
print(json.dumps({"job": job, "status": status}))
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    for project in (ROOT, ROOT / "tools"):
        done = subprocess.run(
            [*uv(), "build", "-q", "--wheel", "--out-dir", str(out), str(project)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    return {path.name.split("-")[0]: path for path in out.glob("*.whl")}


def _venv(path: Path, *wheels: Path) -> Path:
    """A virtual environment at path (made if missing) with the wheels installed."""
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([*uv(), "venv", "-q", "--python", "3.12", str(path)], check=True, env=env)
    done = subprocess.run(
        [*uv(), "pip", "install", "-q", "--python", str(python), *map(str, wheels)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return python


def _run(python: Path, dsn: str, cwd: Path, **env: str) -> dict[str, object]:
    clean = {"PATH": os.environ["PATH"], "HOME": str(cwd), **env}  # no PYTHONPATH, no DSN
    done = subprocess.run(
        [str(python), "-I", "-c", ENQUEUE, dsn],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=clean,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result | {"stderr": done.stderr[-2000:]}


def test_the_runtime_wheel_ships_the_runtime_only(wheels: dict[str, Path]) -> None:
    """Catches the demo, the benchmark, the embedded server or the local kicker shipped in
    the wheel an app (and Lambda) installs, and a wheel missing its handlers or py.typed."""
    names = zipfile.ZipFile(wheels["pgkick"]).namelist()
    modules = {name for name in names if name.startswith("pgkick/")}
    assert {"pgkick/py.typed", "pgkick/aws/worker.py", "pgkick/aws/reaper.py"} <= modules
    assert not [n for n in modules if any(w in n for w in ("bench", "demo", "embedded", "local"))]
    assert not [n for n in names if n.startswith("pgkick_dev/")]
    metadata = zipfile.ZipFile(wheels["pgkick"]).read(
        next(n for n in names if n.endswith("METADATA"))
    )
    requires = [line for line in metadata.decode().splitlines() if line.startswith("Requires-")]
    assert [r for r in requires if "extra ==" not in r] == [
        "Requires-Python: >=3.12",
        "Requires-Dist: boto3>=1.34.32",
        "Requires-Dist: psycopg[binary]>=3.2",
    ]
    assert "Requires-Dist: aws-lambda-powertools>=3.0; extra == 'lambda'" in requires


@pytest.mark.slow
def test_installed_wheels_run_a_job_and_refuse_without_a_kicker(
    wheels: dict[str, Path], dsn: str, tmp_path: Path
) -> None:
    """Catches what a new user hit: the local kicker loading the handler by a file path of
    the checkout (FileNotFoundError in site-packages, the job stayed queued); and, with
    nothing configured, processes spawned or a job written before the error."""
    python = _venv(tmp_path / "venv", wheels["pgkick"])
    cwd = tmp_path / "app"
    cwd.mkdir()
    migrate = subprocess.run(
        [str(python.parent / "pgkick"), "migrate", "--dsn", dsn, "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd)},
    )
    assert migrate.returncode == 0, migrate.stderr
    refused = _run(python, dsn, cwd)
    assert refused["error"] == "ConfigError"
    assert "PGKICK_WORKER_FUNCTION" in str(refused["message"])
    without_tooling = _run(python, dsn, cwd, PGKICK_KICKER="local")
    assert "pgkick-dev" in str(without_tooling["message"])
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)

    _venv(tmp_path / "venv", wheels["pgkick"], wheels["pgkick_dev"])  # development install
    # The app's configuration: its database for the workers, the local kicker for development.
    done = _run(
        python,
        dsn,
        cwd,
        PGKICK_KICKER="local",
        DATABASE_URL=dsn,
        PGKICK_DEV_URL=os.environ["PGKICK_DEV_URL"],  # this test's own stack (conftest)
    )
    assert done["status"] == "done", done
