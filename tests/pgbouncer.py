"""A real PgBouncer in transaction mode in front of the test server, started by the test.

Why real: what breaks through a transaction-mode pooler is the protocol (a
statement prepared on one server connection and used on another), which no
fake shows. Debian's `pgbouncer` package provides the binary (`.ci/run`
installs it); like PostgreSQL it refuses to run as root, so as root it runs as
the embedded server's unprivileged OS user. It listens on a free loopback
port, pools few server connections so that clients share them, and is stopped
by its own process id.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgkick_dev.embedded import free_port


def binary() -> str | None:
    """Debian installs it in /usr/sbin, which a non-root PATH may lack."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")


def available() -> bool:
    return binary() is not None


# Skipped only where pgbouncer is missing and nobody required it; .ci/run requires it
# (PGKICK_REQUIRE_PGBOUNCER=1), so there a missing pgbouncer fails instead.
requires_pgbouncer = pytest.mark.skipif(
    not available() and not os.environ.get("PGKICK_REQUIRE_PGBOUNCER"),
    reason="pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)",
)


@contextmanager
def pgbouncer(server_dsn: str, os_user: str | None, *, pool_size: int = 2) -> Iterator[str]:
    """Yields a DSN template: `make_conninfo(result, dbname=...)` reaches any database."""
    parts = conninfo_to_dict(server_dsn)
    user, password = str(parts.get("user", "postgres")), str(parts.get("password", ""))
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    folder.chmod(0o777)  # the unprivileged user writes its log here
    port = free_port()
    (folder / "userlist.txt").write_text(f'"{user}" "{password}"\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={parts.get('host', '127.0.0.1')} port={parts.get('port', 5432)}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = plain\nauth_file = {folder / 'userlist.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 100\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
    )
    for name in ("userlist.txt", "pgbouncer.ini"):
        (folder / name).chmod(0o644)
    argv = [binary() or "pgbouncer", str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", os_user or "postgres", "--", *argv]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/")
    try:
        _wait_listening(port, process, folder)
        yield make_conninfo(server_dsn, host="127.0.0.1", port=port)
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_listening(port: int, process: subprocess.Popen[bytes], folder: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode() if process.stdout else ""
            log_file = folder / "pgbouncer.log"
            log = log_file.read_text() if log_file.exists() else ""
            raise RuntimeError(f"pgbouncer exited ({process.returncode}): {output}{log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("pgbouncer did not start listening within 10 s")
