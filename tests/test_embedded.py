"""The embedded PostgreSQL 17: as root and as a normal user, restarts, clear errors."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgkick_dev import embedded
from pgkick_dev.embedded import EmbeddedPostgres, EmbeddedPostgresError

ROOT = Path(__file__).parent.parent


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder any user can reach (the server may run as an unprivileged user)."""
    path = Path(tempfile.mkdtemp(prefix="pgkick-embedded-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def version(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]


def test_starts_stops_and_restarts_on_the_kept_folder(folder: Path) -> None:
    server = EmbeddedPostgres(folder / "data")
    with server:
        assert version(server.dsn) == "17.11"
        with psycopg.connect(server.dsn) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        if os.geteuid() == 0:
            owner = (folder / "data").stat().st_uid
            assert owner != 0, "as root the server must run as an unprivileged user"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.dsn, connect_timeout=2)
    again = EmbeddedPostgres(folder / "data")
    with again, psycopg.connect(again.dsn) as conn:
        assert conn.execute("SELECT n FROM kept").fetchone() == (42,)
    # a new process on the folder takes its last port back: `pgkick dev`'s DATABASE_URL,
    # exported once, stays true across its restarts (it moved to a new port each time)
    assert again.dsn == server.dsn
    with socket.socket() as squatter:  # unless someone else holds it now: any free port
        # SO_REUSEADDR: the server's closed connections may leave the port in TIME_WAIT
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", server.port or 0))
        squatter.listen()
        third = EmbeddedPostgres(folder / "data")
        with third:
            assert third.port != server.port and version(third.dsn) == "17.11"


def test_port_taken_is_a_clear_error(folder: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(
            EmbeddedPostgresError, match=f"port {port} on 127.0.0.1 is already in use"
        ):
            EmbeddedPostgres(folder / "data", port=port).start()


def test_failed_start_reports_the_server_log(folder: Path) -> None:
    server = EmbeddedPostgres(folder / "data", settings={"shared_buffers": "'nonsense'"})
    with pytest.raises(EmbeddedPostgresError) as failure:
        server.start()
    message = str(failure.value)
    assert "pg_ctl start failed" in message
    assert "last lines of the server log" in message and "shared_buffers" in message


def test_missing_binaries_are_named(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_POSTGRES_BIN", str(folder / "nowhere"))
    with pytest.raises(EmbeddedPostgresError, match="holds no postgres binary"):
        EmbeddedPostgres(folder / "data").start()


def test_runs_for_a_normal_user_too(folder: Path) -> None:
    """The module as an unprivileged user runs it: no runuser, its own uid (root becomes one)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = embedded._unprivileged_user()
        prefix = [shutil.which("runuser") or "runuser", "-u", user, "--"]
        shutil.chown(folder, user)
    bin_dir = EmbeddedPostgres(folder / "probe").tool("postgres").parent  # reachable by user
    shutil.copy(ROOT / "tools/pgkick_dev/embedded.py", folder / "embedded.py")
    (folder / "pgkick").mkdir()  # what embedded.py imports of pgkick: its error root
    (folder / "pgkick" / "__init__.py").write_text("")
    shutil.copy(ROOT / "functions/pgkick/errors.py", folder / "pgkick" / "errors.py")
    script = folder / "run.py"
    script.write_text(
        "import os, embedded\n"
        "s = embedded.EmbeddedPostgres('data')\n"
        "assert s.os_user is None, s.os_user\n"
        "print(s.start(), os.geteuid())\n"
        "s.stop()\n"
    )
    done = subprocess.run(
        [*prefix, "/usr/bin/python3", str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PGKICK_POSTGRES_BIN": str(bin_dir)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    dsn, uid = done.stdout.split()
    assert dsn.startswith("postgresql://postgres:") and int(uid) != 0
    assert (folder / "data" / "PG_VERSION").read_text().strip() == "17"
