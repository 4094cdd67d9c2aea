"""The local ports an environment's emulator listens on: handed out once, checked as its own.

Why: each environment's RIE is told two ports (its invocation address and its Runtime API
address), picked by binding port 0 and closing the probe, before the RIE binds them. The
kernel may hand the same free port to two probes a few milliseconds apart, and a stack
starting eight environments at once asks for sixteen: 2,000 probes in a row here drew 127
ports a second time. Then the second RIE cannot bind and exits, while its invocation,
posted to the port, reaches the first environment's emulator, which takes a second
invocation while busy and crashes (a bench run lost a minute to one such collision, the
two invocations retried as failed ones). Lambda never does that, so a stand-in must not.

Two guards. Within a process, `free_port` never hands out a port it handed out in the
last `HELD_SECONDS` (an RIE binds within milliseconds of its start, or exits). Across
processes (two stacks on one machine, `pytest -n 2`), `wait_for_own_listener` waits until
the RIE itself listens on its port before anything is posted there: the socket listening
on it (/proc/net/tcp) must be one of the RIE process's file descriptors. Where /proc is
not there to read, nothing can be told and the invocation is posted as before.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

HELD_SECONDS = 60.0
LISTEN = "0A"  # the TCP state in /proc/net/tcp

_lock = threading.Lock()
_handed: dict[int, float] = {}  # port: when it was handed out


def free_port(host: str = "127.0.0.1") -> int:
    """A free port on `host` that this process has not handed out in the last minute (the
    stack's own server takes its port here too, so no environment is handed it)."""
    with _lock:
        now = time.monotonic()
        for port, since in list(_handed.items()):
            if now - since > HELD_SECONDS:
                del _handed[port]
        while True:
            with socket.socket() as probe:
                probe.bind((host, 0))
                port = int(probe.getsockname()[1])
            if port not in _handed:
                _handed[port] = now
                return port


def wait_for_own_listener(process: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """Until `process` itself listens on `port`: True. False if it exits first, if another
    process listens there, or after `timeout` seconds. True at once where /proc cannot
    tell (the invocation is posted as it was before this check)."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            inode = listening_socket(port)
        except OSError:
            return True
        if inode is not None:
            return holds(process.pid, inode)
        time.sleep(0.005)
    return False


def listening_socket(port: int) -> str | None:
    """The inode of the IPv4 socket listening on `port`, None if none does. Raises OSError
    where /proc/net/tcp cannot be read."""
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
            return fields[9]
    return None


def holds(pid: int, inode: str) -> bool:
    """Whether one of process `pid`'s file descriptors is the socket `inode`."""
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == f"socket:[{inode}]":
                    return True
    return False


class PortTaken(OSError):
    """The server's port is held by another process (see `taken_by_another`)."""


def taken_by_another(host: str, port: int) -> bool:
    """Whether `pgkick dev` could not serve `host:port` because something else listens there.

    Why: found only when uvicorn binds, a busy port ended `pgkick dev` in a traceback after
    the embedded database had been started. Probed as uvicorn binds (SO_REUSEADDR, so a
    port left in TIME_WAIT by the last run is not taken for a busy one), before anything
    starts. A host that does not resolve is left for the server to report."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False
