"""A fresh app, as a new user makes one: both wheels installed in its own virtualenv, its own
task module in its own folder outside the repo, `pgkick dev` in one process and a two-line
script that enqueues and exits in another. The job is done within seconds and its log line
is in the dev server's output: with PGKICK_KICKER=local, with PGKICK_KICKER=lambda and
boto3's endpoint variables, and for a delayed job woken through the Scheduler endpoint.
Without a running stack (and autostart off) the script is refused before anything is written."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgkick.cli.main import main
from pgkick.connections.db import database_identity
from pgkick.errors import ConfigError
from pgkick_dev.devserver.ports import free_port
from pgkick_dev.devserver.rie_process import descendants
from pgkick_dev.local import autostart
from pgkick_dev.local.autostart import status as client_status
from pgkick_dev.local.client import connect
from tests.devserver_fixtures import ROOT
from tests.sam import uv

TASKS = """import pgkick


@pgkick.task("send_receipt")
def send_receipt(payload):
    print(f"receipt sent to {payload['to']}")
"""
SCRIPT = """import pgkick, sys
print(pgkick.enqueue_and_kick({"to": sys.argv[1]}, task="send_receipt", delay=float(sys.argv[2])))
"""


@pytest.fixture(scope="module")
def app_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the two wheels (`uv build --wheel` at the root and in tools/)."""
    base = tmp_path_factory.mktemp("fresh")
    started = time.monotonic()
    for folder in (ROOT, ROOT / "tools"):
        subprocess.run(
            [*uv(), "build", "-q", "--wheel", "-o", str(base / "dist")],
            cwd=folder,
            check=True,
            capture_output=True,
        )
    env = {**os.environ, "VIRTUAL_ENV": str(base / "venv")}
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [*uv(), "venv", "-q", "--python", sys.executable, str(base / "venv")], check=True, env=env
    )
    wheels = sorted(str(w) for w in (base / "dist").glob("*.whl"))
    subprocess.run([*uv(), "pip", "install", "-q", *wheels], check=True, env=env)
    print(f"fresh app's virtualenv in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return base / "venv" / "bin" / "python"


@pytest.fixture
def app(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "shop_tasks.py").write_text(TASKS)
    (folder / "enqueue.py").write_text(SCRIPT)
    return folder


def app_env(dsn: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGKICK_", "AWS_"))}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return {**env, "DATABASE_URL": dsn, "PGKICK_TASKS": "shop_tasks", **extra}


class DevProcess:
    def __init__(self, python: Path, folder: Path, env: dict[str, str], *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "dev.out"
        self.process = subprocess.Popen(
            [
                str(python),
                "-c",
                "import sys; from pgkick.cli import main; sys.exit(main())",
                "dev",
                "--port",
                str(self.port),
                *flags,
            ],
            cwd=folder,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.wait_for("an app uses it with", 60)

    def output(self) -> str:
        return self.log.read_text()

    def wait_for(self, text: str, timeout: float) -> float:
        started = time.monotonic()
        while text not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() - started < timeout, self.output()
            time.sleep(0.05)
        return time.monotonic() - started

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


@pytest.fixture
def dev(app_python: Path, app: Path, dsn: str) -> Iterator[DevProcess]:
    process = DevProcess(app_python, app, app_env(dsn), "--fast-scheduler")
    yield process
    process.stop()


def run_script(python: Path, folder: Path, env: dict[str, str], to: str, delay: float) -> int:
    done = subprocess.run(
        [str(python), "enqueue.py", to, str(delay)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return int(done.stdout.split()[-1])


def status(dsn: str, job_id: int) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT status FROM pgkick.jobs WHERE id = %s", (job_id,)).fetchone()
    return str(row[0]) if row else "missing"


def test_a_script_that_enqueues_and_exits_gets_its_job_run(
    app_python: Path, app: Path, dsn: str, dev: DevProcess
) -> None:
    assert "KIND: schedules fire at the second (--fast-scheduler)" in dev.output()
    assert "database: --dsn" not in dev.output()
    # which database, not only where its name came from (no password)
    assert f"database: $DATABASE_URL ({database_identity(dsn)})" in dev.output()
    # on a port of its own, the banner gives the address the app's kicker needs
    assert f"an app uses it with: PGKICK_KICKER=local PGKICK_DEV_URL={dev.url} " in dev.output()
    local = app_env(dsn, PGKICK_KICKER="local", PGKICK_DEV_URL=dev.url, PGKICK_DEV_AUTOSTART="0")
    job = run_script(app_python, app, local, "local@example.com", 0)
    took = dev.wait_for("receipt sent to local@example.com", 30)
    line = next(x for x in dev.output().splitlines() if "receipt sent to local@" in x)
    assert line.startswith("pgkick-worker [") and status(dsn, job) in ("running", "done")
    lam = app_env(
        dsn,
        PGKICK_KICKER="lambda",
        PGKICK_WORKER_FUNCTION="pgkick-worker",
        AWS_ENDPOINT_URL_LAMBDA=dev.url,
        AWS_ENDPOINT_URL_SCHEDULER=dev.url,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="dev",
        AWS_SECRET_ACCESS_KEY="dev",
        PGKICK_WORKER_ARN="arn:aws:lambda:us-east-1:123456789012:function:pgkick-worker",
        PGKICK_SCHEDULER_ROLE_ARN="arn:aws:iam::123456789012:role/scheduler",
    )
    job2 = run_script(app_python, app, lam, "lambda@example.com", 0)
    dev.wait_for("receipt sent to lambda@example.com", 30)
    job3 = run_script(app_python, app, lam, "later@example.com", 2)
    assert status(dsn, job3) == "queued"
    waited = dev.wait_for("receipt sent to later@example.com", 90)  # the next whole minute
    deadline = time.monotonic() + 10
    while {status(dsn, j) for j in (job, job2, job3)} != {"done"}:
        assert time.monotonic() < deadline, [status(dsn, j) for j in (job, job2, job3)]
        time.sleep(0.1)
    print(f"local kick to done log line: {took:.2f} s; delayed job woke after {waited:.1f} s")


@pytest.mark.parametrize("given", ["--dsn", "DATABASE_URL"])
def test_a_named_database_without_pgkicks_schema_is_refused_before_serving(
    empty_dsn: str, given: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches (review 61, F1) docs/develop/local.md's step 3 with `DATABASE_URL` set to a
    database never migrated: `pgkick dev` printed its banner and served, and the app's first
    enqueue failed with SchemaError (the embedded database is migrated by `pgkick dev`, a
    named one never). Refused before anything is served, naming `pgkick migrate --dsn`."""
    argv = ["dev", "--port", str(free_port()), "--exit-when-idle", "0"]  # never hangs
    if given == "--dsn":
        argv += ["--dsn", empty_dsn]
    else:
        monkeypatch.setenv("DATABASE_URL", empty_dsn)
    with pytest.raises(SystemExit) as refused:
        main(argv)
    said = str(refused.value)
    assert "pgkick's schema is missing" in said and "pgkick migrate --dsn" in said, said
    assert given in said, said
    assert "serving" not in capsys.readouterr().out  # refused before the server started


def test_a_bad_idle_exit_is_refused_when_the_kicker_is_made() -> None:
    """Catches PGKICK_DEV_IDLE_EXIT read loosely (a typo would leave a detached stack
    running for a day, or stopping before its job) or checked only when a stack has to
    be started (a typo would pass unnoticed while one runs)."""
    for bad in ("soon", "0", "-5", "1e9", "nan"):
        # no stack answers, none may start: only the value's own refusal names it
        nobody = {
            "PGKICK_DEV_URL": f"http://127.0.0.1:{free_port()}",
            "PGKICK_DEV_AUTOSTART": "0",
            "PGKICK_DEV_IDLE_EXIT": bad,
        }
        with pytest.raises(ConfigError, match="PGKICK_DEV_IDLE_EXIT"):
            connect(nobody)
    assert autostart.idle_exit_seconds({}) == autostart.IDLE_EXIT_SECONDS == 60.0
    assert autostart.idle_exit_seconds({"PGKICK_DEV_IDLE_EXIT": " 2.5 "}) == 2.5


def test_without_a_running_stack_the_script_is_refused_before_writing(
    app_python: Path, app: Path, dsn: str
) -> None:
    port = free_port()
    env = app_env(
        dsn,
        PGKICK_KICKER="local",
        PGKICK_DEV_URL=f"http://127.0.0.1:{port}",
        PGKICK_DEV_AUTOSTART="0",
    )
    done = subprocess.run(
        [str(app_python), "enqueue.py", "x@example.com", "0"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # the command to start names the port the script looks at (not the default's 3001)
    said = f"start it in another terminal (`pgkick dev --port {port}`)"
    assert done.returncode != 0 and said in done.stderr, done.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


def test_without_a_running_stack_one_is_started_detached_and_stops_by_itself(
    app_python: Path, app: Path, dsn: str
) -> None:
    """Catches a kick that dies with its caller: the script exits at once, the stack it
    started runs the job, says where its log is, and stops once nothing is pending."""
    url = f"http://127.0.0.1:{free_port()}"
    # No safety wake-up: booked a minute ahead, it is pending (and holds the stack) for a
    # minute or two after the job ran (docs/develop/local.md); the stop is the point here.
    env = app_env(
        dsn,
        PGKICK_KICKER="local",
        PGKICK_DEV_URL=url,
        PGKICK_DEV_IDLE_EXIT="2",
        PGKICK_KICK_SAFETY_MS="0",
    )
    done = subprocess.run(
        [str(app_python), "enqueue.py", "detached@example.com", "0"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "detached" in done.stderr and ".pgkick/dev.log" in done.stderr
    job = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 60
    while status(dsn, job) != "done":
        assert time.monotonic() < deadline, (app / ".pgkick" / "dev.log").read_text()
        time.sleep(0.1)
    stop_by = time.monotonic() + 20  # PGKICK_DEV_IDLE_EXIT=2, not the default minute
    while client_status(url) is not None:  # it stops by itself, nothing pending
        assert time.monotonic() < stop_by, "the detached stack did not stop 2 s after idle"
        time.sleep(0.2)
    log = (app / ".pgkick" / "dev.log").read_text()
    assert "receipt sent to detached@example.com" in log and "nothing pending: stopping" in log


LONG_APP = """import sys, time, pgkick
from pgkick_dev.local.autostart import status
url = sys.argv[1]
print(pgkick.enqueue_and_kick({"to": "first@example.com"}, task="send_receipt"), flush=True)
deadline = time.monotonic() + 60
while status(url) is not None:  # the detached stack stops once nothing is pending
    assert time.monotonic() < deadline, "the detached stack did not stop"
    time.sleep(0.2)
print(pgkick.enqueue_and_kick({"to": "second@example.com"}, task="send_receipt"), flush=True)
"""


def test_a_long_running_app_starts_the_stack_again_once_it_stopped_idle(
    app_python: Path, app: Path, dsn: str
) -> None:
    """Catches a kicker that finds (or starts) its stack only when it is made, once per
    process: a web app or a shell whose detached stack stopped idle got a refused
    connection on its next kick, and its job waited for a sweep that does not run locally."""
    url = f"http://127.0.0.1:{free_port()}"
    (app / "long_app.py").write_text(LONG_APP)
    env = app_env(
        dsn,
        PGKICK_KICKER="local",
        PGKICK_DEV_URL=url,
        PGKICK_DEV_IDLE_EXIT="1",
        PGKICK_KICK_SAFETY_MS="0",
    )
    try:
        done = subprocess.run(
            [str(app_python), "long_app.py", url],
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert "wait for a sweep or the reaper" not in done.stderr, done.stderr
        jobs = [int(x) for x in done.stdout.split()]
        deadline = time.monotonic() + 60
        while {status(dsn, j) for j in jobs} != {"done"}:
            assert time.monotonic() < deadline, (app / ".pgkick" / "dev.log").read_text()
            time.sleep(0.1)
        assert done.stderr.count("started `pgkick dev`") == 2, done.stderr
    finally:
        found = client_status(url)
        if found is not None:
            os.kill(int(found["pid"]), 15)


SLOW_TASKS = (
    TASKS
    + """

@pgkick.task("slow")
def slow(payload):
    import time
    print("slow task started", flush=True)
    time.sleep(300)
"""
)


def running(pid: int) -> bool:
    """Not exited (a zombie, exited and not yet reaped, counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_killed_stack_takes_its_environments_with_it(
    app_python: Path, app: Path, dsn: str
) -> None:
    """Catches environments that outlive a `pgkick dev` killed outright (SIGKILL, a crash):
    started in sessions of their own, the RIE and its runtime ran on, and the orphan drained
    the next script's jobs, failing them on the dead server's pipe."""
    (app / "shop_tasks.py").write_text(SLOW_TASKS)
    dev = DevProcess(app_python, app, app_env(dsn))
    under: list[int] = []
    try:
        local = app_env(
            dsn, PGKICK_KICKER="local", PGKICK_DEV_URL=dev.url, PGKICK_DEV_AUTOSTART="0"
        )
        subprocess.run(
            [str(app_python), "-c", "import pgkick; pgkick.enqueue_and_kick({}, task='slow')"],
            cwd=app,
            env=local,
            check=True,
            timeout=60,
        )
        dev.wait_for("slow task started", 30)
        under = descendants(dev.process.pid)  # the RIE and its runtime
        assert len(under) >= 2, under
        os.kill(dev.process.pid, signal.SIGKILL)
        dev.process.wait(10)
        deadline = time.monotonic() + 10
        while alive := [pid for pid in under if running(pid)]:
            assert time.monotonic() < deadline, f"left running: {alive}"
            time.sleep(0.05)
    finally:
        for pid in under:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if dev.process.poll() is None:
            dev.stop()


def test_a_closed_terminal_stops_the_stack_as_ctrl_c_does(app_python: Path, app: Path) -> None:
    """Catches SIGHUP (the terminal `pgkick dev` ran in was closed) left to Python's
    default: the process died at once, without its orderly stop, and its embedded
    PostgreSQL (and, before they died with it, its frozen environments) ran on."""
    env = app_env("")
    del env["DATABASE_URL"]
    data = Path(tempfile.mkdtemp(prefix="pgkick-hup-", dir="/tmp"))  # postgres must reach it
    data.chmod(0o755)
    dev = DevProcess(app_python, app, env, "--data-dir", str(data))
    pid_file = data / "data" / "postmaster.pid"
    try:
        assert pid_file.exists(), dev.output()
        dev.process.send_signal(signal.SIGHUP)
        assert dev.process.wait(60) == 0, dev.output()
        assert not pid_file.exists(), dev.output()  # the embedded PostgreSQL was stopped
    finally:
        if dev.process.poll() is None:
            dev.stop()
        if pid_file.exists():  # left running: stopped here, by the pid it wrote
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        shutil.rmtree(data, ignore_errors=True)


def test_a_dev_url_without_a_port_or_a_stack_that_exits_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches the port read as whatever follows the URL's last colon (none given: the
    stack was started with its host as the port, exited at once, and the script waited a
    minute to blame the stack) and a start that waited on a stack that had already exited,
    never saying why."""
    monkeypatch.chdir(tmp_path)  # the started stack's log, .pgkick/dev.log, goes here
    env = {k: v for k, v in os.environ.items() if k != "PGKICK_DEV_AUTOSTART"}
    for url in ("http://127.0.0.1", "http://127.0.0.1:notaport"):
        with pytest.raises(ConfigError, match="give the port"):
            connect({**env, "PGKICK_DEV_URL": url})
    with pytest.raises(ConfigError, match="only on this machine"):
        connect({**env, "PGKICK_DEV_URL": "http://192.0.2.1:3001"})
    assert not (tmp_path / ".pgkick").exists()  # nothing was started
    rie = tmp_path / "no-such-rie"
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match=f"exited.*{rie}"):
        connect({**env, "PGKICK_DEV_URL": url, "PGKICK_DEV_RIE": str(rie)})
