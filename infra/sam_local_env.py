"""What a `sam local` container needs on Linux to reach the database, and nothing more
from the caller's shell.

Why each piece:
- a container's 127.0.0.1 is its own, and `host.docker.internal` resolves only when it
  is added (`--add-host host.docker.internal:host-gateway`, the host's address on
  Docker's bridge). A PostgreSQL on the host's loopback (the embedded one, a default
  install) neither listens there nor admits other clients, so `Forwarder` runs
  infra/docker_bridge.py on the bridge address, on a free port, in front of it;
- the DSN may be a URL or key=value (the tests' are key=value): psycopg parses it, and
  `container_dsn()` writes the URL the container uses, through the forwarder;
- SAM gives the container the caller's value of every variable the template declares
  (a shell with PGKICK_TASKS=pgkick_dev.tasks makes the worker fail to import it, and
  `sam local invoke` still exits 0): `sam_environment()` is the caller's environment
  without them, so only the template and the env file decide.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import yaml
from psycopg.conninfo import conninfo_to_dict

from infra import docker_bridge, local_invoke
from pgkick.connections.redact import redact

ROOT = Path(__file__).resolve().parent.parent
CONTAINER_HOST = "host.docker.internal"
ENV_FILE = ROOT / "infra" / "env.linux.json"


def container_dsn(dsn: str, port: int, *, host: str = CONTAINER_HOST) -> str:
    """`dsn`'s user, password and database, reached at host:port, as a URL with a
    5-second connect timeout unless it names one (an unreachable database fails fast, not
    at the timeout), and every other option it names (sslmode, options, ...): dropping
    them ran the container with other settings than the developer's, an `sslmode=verify-full`
    silently weakened to libpq's default (a review of `sam local`, left in note 61)."""
    parts = conninfo_to_dict(dsn)
    user = quote(str(parts.pop("user", None) or "postgres"), safe="")
    password = parts.pop("password", None)
    secret = f":{quote(str(password), safe='')}" if password else ""
    database = quote(str(parts.pop("dbname", None) or user or "postgres"), safe="")
    for where in ("host", "hostaddr", "port"):  # the container reaches it through host:port
        parts.pop(where, None)
    options = {"connect_timeout": "5", **{name: str(value) for name, value in parts.items()}}
    query = urlencode(options, quote_via=quote)  # %20, not +: libpq reads no + as a space
    return f"postgresql://{user}{secret}@{host}:{port}/{database}?{query}"


def server_address(dsn: str) -> tuple[str, int]:
    """Where the server behind `dsn` listens, as the forwarder connects to it. ValueError,
    in one line, for a DSN that cannot say: sam_local.py asks first, before the image and
    the build, which a malformed DSN otherwise outlived to end in psycopg's traceback."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error as error:
        said = redact(" ".join(str(error).split()), [dsn])
        raise ValueError(
            f"malformed DSN: {said}; give a URL postgresql://user:password@host:5432/dbname "
            "or key=value pairs (host=... port=... dbname=... user=...)"
        ) from None
    host = str(parts.get("host") or parts.get("hostaddr") or "127.0.0.1")
    if host.startswith("/"):
        raise ValueError("the DSN names a Unix socket: give a TCP host and port")
    port = str(parts.get("port") or 5432)
    if not port.isdigit():
        raise ValueError(f"the DSN's port {port!r} is not a number")
    return host, int(port)


def check_server(dsn: str, *, timeout: float = 5.0) -> None:
    """RuntimeError, naming the address, when nothing accepts connections where `dsn`'s
    server should be. Why before anything: otherwise the image check and `sam build` ran
    first, and the container then failed through the forwarder, naming the bridge address
    and "the server terminated abnormally", never the address that was wrong."""
    host, port = server_address(dsn)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        why = error.strerror or type(error).__name__
        raise RuntimeError(
            f"nothing accepts connections at {host}:{port}, where the DSN puts the database "
            f"({why}): start the server, or give its DSN (--dsn or DATABASE_URL); the "
            "containers reach it through this machine, so it must answer here"
        ) from None


def write_env_file(path: Path, dsn: str, **overrides: str) -> Path:
    """infra/env.linux.json with DATABASE_URL set to `dsn` (and any other global
    variables given), written to `path`: SAM's --env-vars format."""
    env: dict[str, Any] = json.loads(ENV_FILE.read_text())
    env["Parameters"] |= {"DATABASE_URL": dsn, **overrides}
    path.write_text(json.dumps(env, indent=2) + "\n")
    return path


def declared_variables(template: Path) -> set[str]:
    """Every environment variable the template declares (Globals and each function)."""
    loaded = yaml.load(template.read_text(), Loader=local_invoke._Loader)
    sections = [loaded.get("Globals", {}).get("Function", {})]
    sections += [r.get("Properties", {}) for r in loaded.get("Resources", {}).values()]
    names: set[str] = set()
    for section in sections:
        if isinstance(section, dict):
            names.update(section.get("Environment", {}).get("Variables", {}) or {})
    return names


def sam_environment(template: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to run SAM with: the caller's, less every variable the template
    declares (SAM would pass the caller's value into the container), telemetry off."""
    env = dict(os.environ if base is None else base)
    for name in declared_variables(template):
        env.pop(name, None)
    env.pop("VIRTUAL_ENV", None)  # pgkick's venv: SAM runs in its own
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return env | {"SAM_CLI_TELEMETRY": "0"}


class Forwarder:
    """infra/docker_bridge.py, listening on the bridge address (a free port), forwarding
    to the server behind `dsn`; `.port` once entered. Stopped on exit."""

    def __init__(self, dsn: str, *, listen: str | None = None) -> None:
        self.target = server_address(dsn)
        self.listen = listen
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    def __enter__(self) -> Forwarder:
        listen = self.listen = self.listen or docker_bridge.bridge_gateway()  # or NoBridge
        argv = [sys.executable, str(ROOT / "infra" / "docker_bridge.py")]
        argv += ["--to", f"{self.target[0]}:{self.target[1]}", "--port", "0", "--listen", listen]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # printed once it listens (or it exited)
        if not line.startswith("forwarding "):
            self.__exit__(None, None, None)
            raise RuntimeError(f"docker_bridge.py did not start on {listen}: {line.strip()}")
        self.port = int(line.split()[1].rpartition(":")[2])
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            if self.process.stdout is not None:
                self.process.stdout.close()
