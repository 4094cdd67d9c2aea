"""Environments die with the stack: the kernel kills them when their parent dies.

Why: each environment's RIE runs in a session of its own (frozen whole; Ctrl-C is the
server's), so nothing reached it when `pgkick dev` was killed outright (SIGKILL, a crash,
the OOM killer): the RIE and its runtime ran on, and the runtime, mid-drain, claimed the
next jobs and failed them writing to the dead server's pipe. An orderly stop retires them
(pgkick_dev.devserver.environments); this covers the stop that runs no code.

How: Linux's PR_SET_PDEATHSIG, SIGKILL when the parent dies, set twice because each
only reaches one generation: in the RIE (between fork and exec, `preexec`), and in the
runtime the RIE starts (the RIE leaves it running when it dies itself), by running it
through this module (`python -m pgkick_dev.devserver.lifeline <handler>`, then
`python -m awslambdaric <handler>` in the same process). The kernel sends it when the
*thread* that forked the child exits, not the process: so the RIEs are started from one
thread kept for the server's life (`spawn`), never from a request's or an invocation's
thread, which come and go.
Elsewhere than Linux nothing is set, and environments may outlive a killed stack.
"""

from __future__ import annotations

import _thread
import ctypes
import runpy
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the server's side only: the runtime's start (main) imports none of it
    import queue
    import threading
    from concurrent.futures import Future

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_prctl: Callable[..., int] | None = None
if sys.platform == "linux":
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in a forked child


def preexec() -> None:
    """In the child, before exec: SIGKILL when the thread that forked it exits."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# The spawner's state, made at the first spawn: every cold start of a runtime runs this
# module too (main), and pays for no import it does not use.
_jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] | None = None
_spawner: threading.Thread | None = None
_SPAWNER_LOCK = _thread.allocate_lock()  # _thread: built in, already loaded


def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
    while True:
        start, done = jobs.get()
        try:
            done.set_result(start())
        except BaseException as exc:  # handed to the caller, the thread lives on
            done.set_exception(exc)


def spawn[T](start: Callable[[], T]) -> T:
    """`start()` (a Popen with `preexec`) run on the one thread that lives as long as the
    server, so that the child's parent-death signal fires only when the server dies."""
    global _jobs, _spawner
    import queue
    import threading
    from concurrent.futures import Future

    with _SPAWNER_LOCK:
        if _spawner is None or _jobs is None:
            _jobs = queue.SimpleQueue()
            _spawner = threading.Thread(
                target=_serve, args=(_jobs,), name="pgkick-spawner", daemon=True
            )
            _spawner.start()
        jobs = _jobs
    done: Future[T] = Future()
    jobs.put((start, done))
    return done.result()


def main() -> None:
    """The runtime, as the RIE starts it: dies with the RIE, then is awslambdaric."""
    preexec()
    runpy.run_module("awslambdaric", run_name="__main__", alter_sys=True)  # as with -m


if __name__ == "__main__":
    main()
