"""The dev dashboard's awake timeline: measured by the activity monitor on the embedded
database that `pgkick dev` started, estimated from invocations on a named one (where no
monitor session may exist unless --awake-monitor asks for it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from pgkick_dev.awake.monitor import AwakeMonitor
from pgkick_dev.devserver.ports import free_port
from pgkick_dev.ui.timeline import when
from tests.devserver_fixtures import FUNCTION, dev_stack
from tests.helpers import sessions_of

ROOT = Path(__file__).parent.parent
MAIN = "import sys; from pgkick.cli import main; sys.exit(main())"
APP = "pgkick-test-app"  # tests.devserver_handlers.touch_database's application_name


def until(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def awake_rows(page: str) -> list[tuple[str, str]]:
    table = page.split('<table id="awake">')[1].split("</table>")[0]
    return re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td>", table)


def test_the_dev_timeline_shows_the_monitors_measured_spans(dsn: str) -> None:
    monitor = AwakeMonitor(dsn, window=1.0, interval=0.1).start()
    try:
        with dev_stack(
            "tests.devserver_handlers:touch_database", env={"DATABASE_URL": dsn}, awake=monitor
        ) as running:
            until(lambda: monitor.report.suspends >= 1)  # asleep before the invocation
            answer = running.lambda_.invoke(FunctionName=FUNCTION, Payload=b"{}")
            assert b"touched" in answer["Payload"].read()
            until(lambda: monitor.report.resumes >= 1 and APP in monitor.kept_awake_by())
            monitor.stop()  # its spans stop growing: the page must show exactly them
            page = httpx.get(f"{running.url}/timeline", timeout=10).text
    finally:
        monitor.stop()
    assert "The database lane is measured" in page
    assert "Database awake (measured)" in page and "database awake (measured)" in page
    assert "estimated from invocations" not in page
    spans = monitor.awake_spans()
    assert len(spans) >= 2  # awake at the start, suspended, woken by the invocation's session
    assert awake_rows(page) == [(when(a), when(b)) for a, b in spans]
    kept = page.split('<table id="kept-awake">')[1].split("</table>")[0]
    assert f"<td>{APP}</td>" in kept


def dev_process(
    dsn: str | None, folder: Path, *flags: str, port: int = 0
) -> tuple[subprocess.Popen[bytes], Path]:
    """`pgkick dev` on a named database ($DATABASE_URL; None: its embedded one), until
    its banner is out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGKICK_", "AWS_"))}
    env.pop("DATABASE_URL", None)
    log = folder / f"dev{len(flags)}.out"
    process = subprocess.Popen(
        [sys.executable, "-c", MAIN, "dev", "--port", str(port or free_port()), *flags],
        cwd=folder,
        env=env if dsn is None else {**env, "DATABASE_URL": dsn},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        until(lambda: "an app uses it with" in log.read_text() or process.poll() is not None, 60)
    except AssertionError:
        process.terminate()
        raise
    assert process.poll() is None, log.read_text()
    return process, log


def test_no_monitor_session_on_a_named_database_unless_asked(dsn: str, tmp_path: Path) -> None:
    process, log = dev_process(dsn, tmp_path)
    try:
        for _ in range(20):  # two seconds: the monitor would look every half second
            assert sessions_of(dsn, "pgkick-awake") == 0
            time.sleep(0.1)
        assert "awake: estimated from invocations (no monitor on a named database" in (
            log.read_text()
        )
    finally:
        process.terminate()
        process.wait(30)
    process, log = dev_process(dsn, tmp_path, "--awake-monitor")
    try:
        until(lambda: sessions_of(dsn, "pgkick-awake") == 1)
        assert "WARNING: --awake-monitor on a named database" in log.read_text()
    finally:
        process.terminate()
        process.wait(30)
    assert "pgkick dev: database awake" in log.read_text()  # its report, at exit


def test_pgkick_dev_on_its_embedded_database_measures(tmp_path: Path) -> None:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="pgkick-awake-", dir="/tmp"))  # postgres must reach it
    data.chmod(0o755)
    process, log = dev_process(None, tmp_path, "--data-dir", str(data), port=port)
    try:
        embedded = log.read_text().split("your app: DATABASE_URL=")[1].split("\n")[0]
        until(lambda: sessions_of(embedded, "pgkick-awake") == 1)
        page = httpx.get(f"http://127.0.0.1:{port}/timeline", timeout=10).text
        assert "The database lane is measured" in page
        assert '<table id="kept-awake">' in page
        assert "awake: measured by the activity monitor on the embedded database" in (
            log.read_text()
        )
    finally:
        process.terminate()
        process.wait(60)
        shutil.rmtree(data, ignore_errors=True)
    assert "pgkick dev: database awake" in log.read_text()
