"""A Docker daemon for the tests that run `sam local`: the one that answers, or one this
run starts and stops.

Why start one: on a machine with Debian's `docker.io` installed but no service manager
(CI containers, this one), nothing starts `dockerd`. The run starts its own, with its
state, sockets and pid file in a temporary folder and `--iptables=false` (containers
here only reach the host's address on the bridge this daemon creates; nothing is NATed
and the host's firewall is left alone), points DOCKER_HOST at it for everything the
tests run (docker, SAM), and stops it by its pid at the end.

Skipped where Docker is not installed (reason printed), unless PGKICK_REQUIRE_DOCKER is
set (.ci/run sets it): then a missing daemon fails the tests instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REQUIRED = bool(os.environ.get("PGKICK_REQUIRE_DOCKER"))
START_TIMEOUT = 60.0


def unavailable(reason: str) -> None:
    """Skip, or fail where Docker is required."""
    if REQUIRED:
        pytest.fail(f"PGKICK_REQUIRE_DOCKER is set and {reason}", pytrace=False)
    pytest.skip(f"sam local not run: {reason} (apt-get install docker.io busybox-static)")


def answers(env: dict[str, str] | None = None) -> str | None:
    """None when a daemon answers `docker info`, else why not."""
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    except (FileNotFoundError, subprocess.TimeoutExpired) as error:
        return str(error)
    return None if done.returncode == 0 else " ".join(done.stderr.split())[-300:] or "no answer"


@contextmanager
def own_daemon() -> Iterator[str]:
    """Start dockerd in a temporary folder; yields its DOCKER_HOST. Stopped by its pid."""
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    if not Path(dockerd).exists():
        unavailable("no Docker daemon answers and dockerd is not installed")
    if os.geteuid() != 0:
        unavailable("no Docker daemon answers and starting dockerd needs root")
    folder = Path(tempfile.mkdtemp(prefix="pgkick-dockerd-"))
    host = f"unix://{folder}/docker.sock"
    argv = [dockerd, "--host", host, "--data-root", str(folder / "data")]
    argv += ["--exec-root", str(folder / "exec"), "--pidfile", str(folder / "dockerd.pid")]
    argv += ["--iptables=false"]
    log = (folder / "dockerd.log").open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    env = {**os.environ, "DOCKER_HOST": host}
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while (why := answers(env)) is not None:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "dockerd.log").read_text(errors="replace")[-1500:]
                pytest.fail(f"dockerd did not start ({why}):\n{tail}", pytrace=False)
            time.sleep(0.2)
        yield host
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        subprocess.run(["umount", "-R", str(folder / "data")], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def docker_daemon() -> Iterator[str | None]:
    """The daemon the tests use: yields its DOCKER_HOST (None: the default one answered),
    with DOCKER_HOST set in this process's environment while it runs."""
    if shutil.which("docker") is None:
        unavailable("no docker command")
    if answers() is None:
        yield os.environ.get("DOCKER_HOST")
        return
    with own_daemon() as host:
        previous = os.environ.get("DOCKER_HOST")
        os.environ["DOCKER_HOST"] = host
        try:
            yield host
        finally:
            if previous is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = previous
