"""The task registry: names in the jobs table mapped to Python functions.

Why a registry, not import paths in rows: a row names a task; only code the
deployer registered can run, and an unknown name is a failure that says which
names exist (retried until max_attempts, see below). The worker imports the
modules named in PGKICK_TASKS so that their `@task` decorators run.

Why a producer may check names too (`load_tasks()`): a typo (`send_reciept`)
would otherwise be a job that fails in a worker minutes later. A process that
loaded the registry knows every task, so it refuses an unknown name before
writing, listing close ones. A worker meeting an unknown name retries it (a
deploy may be mid-rollout: the producer already runs code the worker lacks)
before failing it, naming the modules it loaded and PGKICK_TASKS.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from datetime import timedelta
from types import FrameType
from typing import Any, Protocol, overload

from pgkick import config, validation
from pgkick.errors import ConfigError, InvalidArgument, UnknownTask
from pgkick.tasks.batch import BatchItem, BatchSpec, batch_spec, single_call
from pgkick.tasks.context import JobContext
from pgkick.tasks.handle import Task, payload_loader
from pgkick.tasks.signature import takes_context
from pgkick.validation import check_name

TaskFunction = Callable[..., Any]
ERROR_CHARS = 2_000  # last_error keeps at most this much


def message_of(exc: BaseException) -> str:
    """`str(exc)`, or what stands for it when str() itself raises (a bad `__str__`)."""
    try:
        return str(exc)
    except Exception as failure:
        return f"<str() of the exception raised {type(failure).__name__}>"


def describe_error(exc: BaseException) -> str:
    """`Type: message`, safe to store whatever the exception holds.

    Why: the text goes into a PostgreSQL text column, which refuses NUL bytes and
    strings that are not valid UTF-8 (a lone surrogate), and `str(exc)` can itself
    raise. Any of these once crashed the worker mid-batch: the job ended as a lease
    expiry and its batch-mates ran again."""
    text = f"{type(exc).__name__}: {message_of(exc)}"[:ERROR_CHARS]
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")


class TaskDecorator(Protocol):
    """What `task("name")` returns: the payload type of the handle is the function's."""

    @overload
    def __call__[P](self, fn: Callable[[P], Any], /) -> Task[P]: ...
    @overload
    def __call__[P](self, fn: Callable[[P, JobContext], Any], /) -> Task[P]: ...


class BatchTaskDecorator(Protocol):
    """What `task("name", batch=N)` returns: the handle is typed by `P` of the function's
    `items: list[BatchItem[P]]` (pgkick.tasks.batch)."""

    def __call__[P](self, fn: Callable[[list[BatchItem[P]]], Any], /) -> Task[P]: ...


class Registry:
    def __init__(self) -> None:
        # name: (the function, how the worker calls it, whether it takes the JobContext)
        self._tasks: dict[str, tuple[TaskFunction, Callable[[Any, JobContext], Any], bool]] = {}
        self._batches: dict[str, BatchSpec] = {}  # the batch tasks among them
        # name: the modules whose top-level code was running when it registered, innermost
        # (the module that declared it, whatever its function's __module__) first
        self._importers: dict[str, tuple[str, ...]] = {}
        self.modules: list[str] = []  # the modules load() imported (PGKICK_TASKS)

    @overload
    def task(self, name: str) -> TaskDecorator: ...
    @overload
    def task(
        self, name: str, *, batch: int, batch_window: float | timedelta | None = None
    ) -> BatchTaskDecorator: ...
    def task(
        self, name: str, *, batch: int | None = None, batch_window: float | timedelta | None = None
    ) -> Any:
        """Decorator: `@registry.task("send_email")` on `fn(payload)` or `fn(payload, job)`;
        `@registry.task("index", batch=100)` on `fn(items: list[BatchItem[P]])`, called
        with up to 100 jobs at once (pgkick.tasks.batch: per-job outcomes, batch_window).

        Returns a `pgkick.tasks.handle.Task` (callable as the function), typed by the payload."""
        check_name("task", name)
        if batch is None and batch_window is not None:
            raise InvalidArgument(f"task {name!r}: batch_window needs batch= (the group size)")

        def register(fn: TaskFunction) -> Task[Any]:
            fn = fn.fn if isinstance(fn, Task) else fn
            if name in self._tasks and self._tasks[name][0] is not fn:
                raise InvalidArgument(f"task {name!r} is already registered")
            if batch is not None:  # checked in full before anything is registered
                spec = batch_spec(name, fn, batch, batch_window)
                wants_job, call, load = True, single_call(spec), spec.load
            else:
                wants_job = takes_context(name, fn)
                load = payload_loader(fn, name)
                call = _call(fn, wants_job, load)
            self._tasks[name] = (fn, call, wants_job)
            self._importers[name] = _importers()
            if batch is not None:
                self._batches[name] = spec
            return Task(name, fn, load)

        return register

    def batch(self, name: str) -> BatchSpec | None:
        """The batch declaration of task `name`, None for a plain (or unknown) task."""
        spec = self._batches.get(name)
        if spec is None or self._tasks.get(name, (None,))[0] is not spec.fn:
            return None  # a module reloaded without it: what `get` runs is the truth
        return spec

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def get(self, name: str) -> Callable[[Any, JobContext], Any] | None:
        """How the worker calls the task: `(payload, context)`, whatever `fn` declared."""
        entry = self._tasks.get(name)
        return None if entry is None else entry[1]

    def takes_job(self, name: str) -> bool:
        """True when the task declared the JobContext parameter, or when this registry does
        not know the task (a subclass that finds tasks elsewhere, as pgkick.testing's does:
        a real context then, never a blank one). Why ask: the worker builds a job's context
        (and its lease flags) only for a task that will read it."""
        entry = self._tasks.get(name)
        return entry is None or entry[2]

    def load(self, modules: Iterable[str]) -> None:
        """Import the modules that register tasks (PGKICK_TASKS, comma-separated); one that
        cannot be imported is a ConfigError naming it, the setting and where Python looked."""
        for module in (m.strip() for m in modules):
            if not module:
                continue
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ConfigError(_import_advice(module, exc)) from exc
            if module not in self.modules:
                self.modules.append(module)

    def unknown(self, name: str) -> str:
        """Why `name` cannot run here: the names it is close to, what this registry knows,
        from which modules, and PGKICK_TASKS (what an operator compares with the deploy)."""
        import difflib  # here: an unknown name is rare, and every cold start imports this

        close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.6)
        modules = sorted({entry[0].__module__ for entry in self._tasks.values()} | {*self.modules})
        return (
            f"unknown task {name!r}"
            + (f" (did you mean {', '.join(map(repr, close))}?)" if close else "")
            + f"; registered: {', '.join(self.names()) or 'none'}"
            + f" from modules {', '.join(modules) or 'none'}"
            + f"; PGKICK_TASKS={config.app_settings().tasks_variable!r}"
            + f" (import path {sys.path[:4]})"
        )

    def check_known(self, name: str) -> None:
        """Raise UnknownTask unless `name` is registered (the producer's hook)."""
        if name not in self._tasks:
            raise UnknownTask(f"task: {self.unknown(name)}; nothing was written")

    def reload(self, modules: Iterable[str]) -> None:
        """Import the modules again, their tasks registered afresh. Why: a warm worker (an
        environment started before the app's code changed) must not fail a job of a task
        the app has just added; it looks again before calling the task unknown.

        A module's tasks are those its top-level code registered (one wrapped by a helper
        without functools.wraps has the helper's __module__). Why all or nothing: if an
        import raises, the registry is left as it was, not without the tasks dropped
        before it (every later job of a task still deployed would fail "unknown task")."""
        importlib.invalidate_caches()
        before = dict(self._tasks), dict(self._batches), dict(self._importers)
        try:
            for module in (m.strip() for m in modules if m.strip()):
                for name in [n for n in self._tasks if self._declared(n, module)]:
                    del self._tasks[name]
                loaded = sys.modules.get(module)
                if loaded is None:
                    importlib.import_module(module)
                else:
                    importlib.reload(loaded)
        except BaseException:
            self._tasks, self._batches, self._importers = before
            raise

    def _declared(self, name: str, module: str) -> bool:
        """Whether task `name` was declared by `module` (registered by its top-level code)."""
        importers = self._importers.get(name, ())
        origin = importers[0] if importers else getattr(self._tasks[name][0], "__module__", None)
        return origin == module


def _importers() -> tuple[str, ...]:
    """The modules whose top-level code is running (each import under way), innermost first:
    read once a registration, at import time."""
    frame: FrameType | None = sys._getframe(1)
    names = []
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            names.append(str(frame.f_globals.get("__name__")))
        frame = frame.f_back
    return tuple(names)


def _call(
    fn: TaskFunction, wants_job: bool, load: Callable[[Any], Any] | None
) -> Callable[[Any, JobContext], Any]:
    """`fn` as the worker calls it, made once at registration (not per job): a dataclass or
    pydantic payload rebuilt first, the context dropped for a function taking the payload only."""
    if load is not None:
        if wants_job:
            return lambda payload, job: fn(load(payload), job)
        return lambda payload, _job: fn(load(payload))
    return fn if wants_job else (lambda payload, _job: fn(payload))


def _import_advice(module: str, exc: ImportError) -> str:
    missing = exc.name or ""
    if missing and (module == missing or module.startswith(missing + ".")):
        return (
            f"PGKICK_TASKS names {module!r}, which Python cannot find ({exc}): run from the "
            f"folder that holds {missing.split('.')[0]!r} or add that folder to PYTHONPATH "
            f"(looked in: {', '.join(p or '.' for p in sys.path[:4])}, ...)"
        )
    return f"PGKICK_TASKS: importing {module!r} failed: {type(exc).__name__}: {exc}"


registry = Registry()
task = registry.task
"""Declare a task: `@pgkick.task("send_receipt")` on `fn(payload)` or `fn(payload, job)`,
`@pgkick.task("embed", batch=10, batch_window=5)` on `fn(items: list[BatchItem[P]])`.

Registers the function under that name in pgkick's registry (what a worker looks a job's
task up in: declare it in a module of PGKICK_TASKS) and returns its typed handle,
`pgkick.Task[P]`, whose payload type is the function's first parameter. A name already
registered to another function, a bad `batch` or a second parameter that is neither the
job's context nor keyword-only is refused here, when the module is imported. Documented
here, not only on `Registry.task`: the reference shows a name only with a docstring."""


def load_tasks(modules: Iterable[str] | None = None) -> list[str]:
    """Import the task modules (default PGKICK_TASKS) into pgkick's registry, and from now on
    refuse, in this process, any enqueue of a task name it does not know (UnknownTask, before
    anything is written). Returns the registered names. Call it at the app's start-up."""
    registry.load(config.task_modules() if modules is None else modules)
    validation.known_task = registry.check_known
    return registry.names()


@task("noop")
def noop(payload: Any) -> None:
    """Does nothing: for benchmarks and smoke tests."""
