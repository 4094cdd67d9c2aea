"""Stops a test session's embedded PostgreSQL when the session dies without its teardown.

Why a process of its own: the server pgkick.testing's pytest plugin starts
(pgkick_dev.scratch.session_server) was stopped and its folder removed only in a
`finally`, which a killed session never reaches: SIGTERM (what a CI timeout and
`timeout` send; pytest runs no teardown on it) or SIGKILL left the postmaster
running and its pgkick-pytest-* folder behind for good, one more per such
session. The session starts this watcher in a session of its own (a signal to
the session's process group does not reach it); it waits for its parent to go
and then, unless the teardown already did, stops the server at once (SIGQUIT:
an immediate shutdown, nothing here is kept) and removes the folder. A
teardown that runs ends the watcher itself. (On a named server, PGKICK_TEST_DATABASE_URL or
DATABASE_URL, nothing is stopped: the next session drops a killed one's databases, see
pgkick.testing.leftovers.)

Run as `python -m pgkick_dev.session_reaper PARENT_PID FOLDER`; only the
standard library is imported, so it starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

POLL = 0.2  # seconds between looks at the parent: a killed session's server ends this soon
STOP_WAIT = 60.0  # seconds an immediate shutdown may take before the folder goes anyway


def postmaster(folder: Path) -> int | None:
    """The pid of the server running on `folder`'s data, or None. Checked against its
    command line where /proc shows it: a stale pid file's pid may be another process now."""
    data = folder / "data"
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if not Path("/proc/self").exists():  # no /proc here (macOS): the pid file is all there is
        return pid
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:  # gone
        return None
    return pid if str(data) in command else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it exists
        return True
    return True


def reap(folder: Path) -> None:
    """Stop the server on `folder` at once, wait for it, and remove the folder."""
    pid = postmaster(folder)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + STOP_WAIT
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL)
    shutil.rmtree(folder, ignore_errors=True)


def watch(parent: int, folder: Path) -> None:
    """Wait for `parent` to end (this process is then re-parented), then reap `folder`."""
    while os.getppid() == parent:
        time.sleep(POLL)
    reap(folder)


if __name__ == "__main__":
    watch(int(sys.argv[1]), Path(sys.argv[2]))
