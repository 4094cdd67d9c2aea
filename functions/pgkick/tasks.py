"""The task registry: names in the jobs table mapped to Python functions.

Why a registry, not import paths in rows: a row names a task; only code the
deployer registered can run, and an unknown name is a permanent failure that
says which names exist. The worker imports the modules named in PGKICK_TASKS
so that their `@task` decorators run.
"""

from __future__ import annotations

import importlib
import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

from pgkick.handle import Task, payload_loader
from pgkick.validation import check_name


class PermanentError(Exception):
    """Raise from a task to fail the job at once, without retries."""


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a task may want beyond its payload: ids for idempotency keys, and a stop signal."""

    id: int
    queue: str
    attempt: int
    max_attempts: int
    lease_lost: threading.Event = field(default_factory=threading.Event)
    extend: Callable[[], bool] = lambda: True

    def extend_lease(self) -> bool:
        """Push this job's lease forward now; False means stop: the job is someone else's."""
        return self.extend()

    @property
    def idempotency_key(self) -> str:
        return f"pgkick-{self.id}"


TaskFunction = Callable[..., Any]
ERROR_CHARS = 2_000  # last_error keeps at most this much


def describe_error(exc: BaseException) -> str:
    """`Type: message`, safe to store whatever the exception holds.

    Why: the text goes into a PostgreSQL text column, which refuses NUL bytes and
    strings that are not valid UTF-8 (a lone surrogate), and `str(exc)` can itself
    raise. Any of these once crashed the worker mid-batch: the job ended as a lease
    expiry and its batch-mates ran again."""
    try:
        message = str(exc)
    except Exception as failure:
        message = f"<str() of the exception raised {type(failure).__name__}>"
    text = f"{type(exc).__name__}: {message}"[:ERROR_CHARS]
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")


class TaskDecorator(Protocol):
    """What `task("name")` returns: the payload type of the handle is the function's."""

    @overload
    def __call__[P](self, fn: Callable[[P], Any], /) -> Task[P]: ...
    @overload
    def __call__[P](self, fn: Callable[[P, JobContext], Any], /) -> Task[P]: ...


class Registry:
    def __init__(self) -> None:
        self._tasks: dict[str, tuple[TaskFunction, bool, Callable[[Any], Any] | None]] = {}

    def task(self, name: str) -> TaskDecorator:
        """Decorator: `@registry.task("send_email")` on `fn(payload)` or `fn(payload, job)`.

        Returns a `pgkick.handle.Task` (callable as the function), typed by the payload."""
        check_name("task", name)

        def register(fn: TaskFunction) -> Task[Any]:
            fn = fn.fn if isinstance(fn, Task) else fn
            if name in self._tasks and self._tasks[name][0] is not fn:
                raise ValueError(f"task {name!r} is already registered")
            wants_job = len(inspect.signature(fn).parameters) >= 2
            self._tasks[name] = (fn, wants_job, payload_loader(fn))
            return Task(name, fn)

        return register

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def get(self, name: str) -> Callable[[Any, JobContext], Any] | None:
        entry = self._tasks.get(name)
        if entry is None:
            return None
        fn, wants_job, load = entry
        if load is not None:  # a dataclass or pydantic payload: rebuilt before the task runs
            typed = fn
            fn = lambda payload, *job: typed(load(payload), *job)  # noqa: E731
        return fn if wants_job else (lambda payload, _job: fn(payload))

    def load(self, modules: Iterable[str]) -> None:
        """Import the modules that register tasks (PGKICK_TASKS, comma-separated)."""
        for module in modules:
            if module.strip():
                importlib.import_module(module.strip())


registry = Registry()
task = registry.task


@task("noop")
def noop(payload: Any) -> None:
    """Does nothing: for benchmarks and smoke tests."""


@task("sleep")
def sleep(payload: Any, job: JobContext) -> None:
    """Sleeps payload["seconds"], waking early if the lease is lost (then it must not write)."""
    job.lease_lost.wait(float(payload.get("seconds", 1)))


@task("flaky")
def flaky(payload: Any, job: JobContext) -> None:
    """Fails its first payload["fail_times"] attempts, then succeeds: retries in action."""
    if job.attempt <= int(payload.get("fail_times", 1)):
        raise RuntimeError(f"flaky: failing attempt {job.attempt} on purpose")


@task("fail")
def fail(payload: Any) -> None:
    """Always fails permanently: a dead job on purpose."""
    raise PermanentError(str(payload.get("reason", "failing on purpose")))


@task("crash")
def crash(payload: Any) -> None:
    """Kills its own worker process, as an out-of-memory job would (the poison-job case)."""
    time.sleep(float(payload.get("after", 0)))
    os.kill(os.getpid(), signal.SIGKILL)
