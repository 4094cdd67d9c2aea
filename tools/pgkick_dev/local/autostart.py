"""Where PGKICK_KICKER=local finds its `pgkick dev`, and how it starts one detached.

Why apart from the client (pgkick_dev.local.client): the client speaks the stack's APIs;
this module decides which stack it speaks to, and refuses, before anything is written,
one that would never run the job.

Finding the stack happens when the kicker is made, before anything is written:
at PGKICK_DEV_URL (default http://127.0.0.1:3001), and again whenever that address
refuses a call (a long-running app outlives the detached stack it started). With
none there, one is started detached (it stops by itself once nothing has been
pending for PGKICK_DEV_IDLE_EXIT seconds, 60 by default, and its log is
.pgkick/dev.log), unless PGKICK_DEV_AUTOSTART=0: then a ConfigError says to start
`pgkick dev`. Never a committed job that nothing will run.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

from pgkick import config
from pgkick.connections.db import database_identity
from pgkick.errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:3001"
IDLE_EXIT_SECONDS = 60.0  # a detached stack stops this long after nothing is pending
START_TIMEOUT = 60.0  # seconds for a detached stack to answer (it may start PostgreSQL)


def status(url: str, timeout: float = 0.5) -> dict[str, Any] | None:
    """The running stack's status, or None when nothing answers there as `pgkick dev`."""
    try:
        with urllib.request.urlopen(f"{url}/_pgkick/status", timeout=timeout) as answer:
            found: dict[str, Any] = json.loads(answer.read())
    except (OSError, ValueError, http.client.HTTPException):  # a bad URL answers nothing
        return None
    return found if found.get("pgkick_dev") else None


def idle_exit_seconds(env: Mapping[str, str]) -> float:
    """PGKICK_DEV_IDLE_EXIT: how long a detached stack waits with nothing pending before
    it stops (seconds, default IDLE_EXIT_SECONDS); refused before anything is written."""
    raw = env.get("PGKICK_DEV_IDLE_EXIT", "").strip()
    if not raw:
        return IDLE_EXIT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 86_400:
        raise ConfigError(
            f"PGKICK_DEV_IDLE_EXIT={raw!r}: give the seconds a detached `pgkick dev` waits "
            f"with nothing pending before it stops, over 0 and at most 86400 (default "
            f"{IDLE_EXIT_SECONDS:.0f})"
        )
    return seconds


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def start_port(url: str) -> int:
    """The port a stack is started on for PGKICK_DEV_URL: refused, before anything is
    started, without one or on another machine (it would never answer there)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise ConfigError(
            f"PGKICK_KICKER=local: PGKICK_DEV_URL={url}: give the port a `pgkick dev` "
            f"answers on, or is started on (e.g. {DEFAULT_URL})"
        )
    if parts.hostname not in LOCAL_HOSTS:
        raise ConfigError(
            f"PGKICK_KICKER=local: no `pgkick dev` answers at {url}, and one is started "
            "only on this machine: start it there, or set PGKICK_DEV_URL to "
            f"http://127.0.0.1:{port}"
        )
    return port


def start_detached(
    url: str, env: Mapping[str, str], idle_exit: float
) -> tuple[subprocess.Popen[bytes], Path]:
    """`pgkick dev` in its own session, outliving this process, stopping `idle_exit` s
    after nothing is pending; returns it and its log's path."""
    port = start_port(url)
    log = Path(".pgkick") / "dev.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-c",
        "import sys; from pgkick.cli import main; sys.exit(main())",
        "dev",
        "--port",
        str(port),
        "--exit-when-idle",
        str(idle_exit),
    ]
    with log.open("ab") as out:
        started = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    return started, log.resolve()


def last_line(log: Path) -> str:
    lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1].strip() if lines else "(nothing)"


def find_or_start(url: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The status of the stack at `url`, started detached if none answers there (unless
    PGKICK_DEV_AUTOSTART=0), refused if it runs its workers elsewhere (another database or
    schema) than this process enqueues; every refusal comes before anything is written."""
    found = status(url)
    if found is None:
        if env.get("PGKICK_DEV_AUTOSTART", "1") == "0":
            command = "pgkick dev" if url == DEFAULT_URL else f"pgkick dev --port {start_port(url)}"
            raise ConfigError(
                f"PGKICK_KICKER=local: no `pgkick dev` answers at {url}: start it in another "
                f"terminal (`{command}`), or set PGKICK_DEV_URL to where it runs"
            )
        started, log = start_detached(url, env, idle_exit_seconds(env))
        deadline = time.monotonic() + START_TIMEOUT
        while found is None and time.monotonic() < deadline:
            if started.poll() is not None:  # it will never answer: say why, now
                raise ConfigError(
                    f"PGKICK_KICKER=local: `pgkick dev` started at {url} exited (code "
                    f"{started.returncode}) before it answered; its log ({log}) ends: "
                    f"{last_line(log)}"
                )
            time.sleep(0.2)
            found = status(url)
        if found is None:
            raise ConfigError(
                f"PGKICK_KICKER=local: `pgkick dev` started at {url} did not answer in "
                f"{START_TIMEOUT:.0f} s (its log: {log}): start it yourself with `pgkick dev`"
            )
        print(
            f"pgkick: started `pgkick dev` at {url}, detached: it stops once nothing is "
            f"pending; its log: {log}",
            file=sys.stderr,
            flush=True,
        )
    _check_database(url, found)
    return found


def _check_database(url: str, found: Mapping[str, Any]) -> None:
    """Refuse, before anything is written, a stack that runs its workers on another
    database or schema than this process enqueues into: its workers would never see this
    job (a stack left from an earlier run, on another project's database or schema)."""
    theirs, their_schema = found.get("database"), found.get("schema")
    try:
        settings = config.app_settings()
        ours, our_schema = database_identity(settings.dsn()), settings.schema
    except (ConfigError, psycopg.ProgrammingError):  # no DSN known here: nothing to compare
        return
    if theirs and theirs != ours:
        raise ConfigError(
            f"PGKICK_KICKER=local: the `pgkick dev` at {url} runs its workers on {theirs}, "
            f"this process enqueues into {ours}: stop it, or set PGKICK_DEV_URL to another "
            "port (a stack starts there), or give both the same DATABASE_URL"
        )
    if their_schema and their_schema != our_schema:
        raise ConfigError(
            f"PGKICK_KICKER=local: the `pgkick dev` at {url} runs its workers on schema "
            f"{their_schema}, this process enqueues into schema {our_schema}: stop it, or "
            "set PGKICK_DEV_URL to another port (a stack starts there), or give both the "
            "same PGKICK_SCHEMA"
        )
