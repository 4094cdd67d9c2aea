"""Typed task handles: what `@pgkick.task("name")` returns.

Why a handle: with a string name and an untyped payload, nothing checks that a
caller's payload matches the task; a typo or a missing field becomes a job that
fails in a worker minutes later. The handle carries the task's name and its
payload type `P` (read from the function's first parameter), so
`send_receipt.enqueue_and_kick({"order": 42})` is checked by mypy or pyright
against the TypedDict, dataclass or pydantic model the task declares.

Dataclass and pydantic payloads are turned into plain JSON values before the
usual validation (the row holds JSON), and turned back into the declared type
before the task runs (a flat dataclass from its fields; pydantic validates).
The handle stays callable as the function it wraps, and the string-name API
(`pgkick.enqueue_and_kick(payload, task="name")`) keeps working beside it.

Why async forms of their own (`enqueue_and_kick_async`, `enqueue_many_async`) and
overloads on `enqueue`: into `pgkick.aio.transaction(conn)` the handle returns a
coroutine, so it is typed as one and mypy rejects a forgotten `await` (an unused
coroutine, or a coroutine where an int was expected). The synchronous
`enqueue_and_kick` called on an event loop's thread blocks that loop for a round
trip: it says so once, with the async form to use instead.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
import warnings
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Unpack, overload

from pgkick.errors import InvalidArgumentType
from pgkick.producer.options import EnqueueOptions, ProducerOptions

if TYPE_CHECKING:
    from pgkick.kick.kickers import Kicker

__all__ = ["EnqueueOptions", "JobSink", "ProducerOptions", "Task"]


class JobSink(Protocol):
    """Anything jobs can be enqueued into: `pgkick.transaction(conn)`'s enqueuer, the
    pending jobs of `pgkick.enqueue_in(conn)`, the Django and SQLAlchemy forms."""

    def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int: ...


class AsyncJobSink(Protocol):
    """Where an asyncio app's jobs go: `pgkick.aio.transaction(conn)`'s enqueuer."""

    def enqueue(
        self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]
    ) -> Coroutine[Any, Any, int]: ...


_warned_about_loop = False


def _warn_if_on_event_loop(name: str) -> None:
    """Once per process: a synchronous enqueue on a running event loop's thread blocks it.
    asyncio is looked up, not imported: a process that never imported it runs no loop."""
    global _warned_about_loop
    asyncio = sys.modules.get("asyncio")
    if _warned_about_loop or asyncio is None or asyncio._get_running_loop() is None:
        return
    _warned_about_loop = True
    warnings.warn(
        f"{name}.enqueue_and_kick() blocks this thread's running event loop for a database "
        f"round trip; in a coroutine use `await {name}.enqueue_and_kick_async(...)`",
        RuntimeWarning,
        stacklevel=3,
    )


def to_json_value(payload: object) -> object:
    """A dataclass or pydantic model as plain JSON values; anything else unchanged."""
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return dataclasses.asdict(payload)
    dump = getattr(payload, "model_dump", None)  # pydantic v2, without importing it
    if callable(dump) and not isinstance(payload, type):
        return dump(mode="json")
    return payload


def payload_loader(fn: Callable[..., Any]) -> Callable[[Any], Any] | None:
    """How to turn a stored payload back into the type `fn`'s first parameter declares.

    None when it declares a plain type (dict, TypedDict, Any): the JSON value is it."""
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # a forward reference that cannot be resolved: no conversion
        return None
    declared = hints.get(params[0].name)
    if isinstance(declared, type) and dataclasses.is_dataclass(declared):
        return _dataclass_loader(declared)
    validate = getattr(declared, "model_validate", None)
    if isinstance(declared, type) and callable(validate):
        return validate  # type: ignore[no-any-return]
    return None


def _dataclass_loader(cls: type) -> Callable[[Any], Any]:
    """A stored payload as the dataclass `cls`, or an error that says the payload does not
    fit it (a job enqueued by name, or by a producer whose dataclass has another shape): the
    bare TypeError named only `__init__`'s missing argument. Retried as any error is: a
    worker deployed before its producer may be the one out of date."""

    def load(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        try:
            return cls(**value)
        except TypeError as exc:
            shape = f"keys {sorted(value)}" if isinstance(value, dict) else type(value).__name__
            raise InvalidArgumentType(  # its keys, not its values: an error is logged and kept
                f"payload ({shape}) does not fit {cls.__qualname__}, the task's payload type: {exc}"
            ) from None

    return load


class Task[P]:
    """A registered task: its name, its function, and typed ways to enqueue it."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the task's function directly (a unit test of the task's own logic)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<pgkick task {self.name!r}>"

    def enqueue_and_kick(self, payload: P, **options: Unpack[ProducerOptions]) -> int:
        """Commit one job on pgkick's own connection, then kick (`pgkick.enqueue_and_kick`)."""
        from pgkick.producer.enqueue import enqueue_and_kick

        _warn_if_on_event_loop(self.name)
        return enqueue_and_kick(to_json_value(payload), task=self.name, **options)

    async def enqueue_and_kick_async(self, payload: P, **options: Unpack[ProducerOptions]) -> int:
        """The same on the event loop's own connections (`pgkick.aio.enqueue_and_kick`)."""
        from pgkick import aio

        return await aio.enqueue_and_kick(to_json_value(payload), task=self.name, **options)

    async def enqueue_many_async(
        self,
        payloads: Iterable[P],
        *,
        dsn: str | None = None,
        kicker: Kicker | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[int]:
        """Many jobs of this task in one commit, then one kick per queue (`pgkick.aio`)."""
        from pgkick import aio

        jobs = [_job(self.name, payload, options) for payload in payloads]
        return await aio.enqueue_many(jobs, dsn=dsn, kicker=kicker)

    @overload
    def enqueue(
        self, into: AsyncJobSink, payload: P, **options: Unpack[EnqueueOptions]
    ) -> Coroutine[Any, Any, int]: ...
    @overload
    def enqueue(self, into: JobSink, payload: P, **options: Unpack[EnqueueOptions]) -> int: ...
    def enqueue(self, into: Any, payload: P, **options: Unpack[EnqueueOptions]) -> Any:
        """Enqueue into a transaction someone else commits: `pgkick.transaction(conn)`,
        `pgkick.enqueue_in(conn)`, `pgkick.contrib.django.jobs()`,
        `pgkick.contrib.sqlalchemy.jobs(session)`; `pgkick.aio.transaction(conn)` gives a
        coroutine to await. Kicked after that commit, never before."""
        if not callable(getattr(into, "enqueue", None)):
            raise InvalidArgumentType(
                f"{self.name}.enqueue: the first argument must be where the job goes "
                f"(pgkick.transaction(conn), pgkick.enqueue_in(conn), ...), got "
                f"{type(into).__name__}"
            )
        return into.enqueue(to_json_value(payload), task=self.name, **options)

    def enqueue_many(
        self,
        payloads: Iterable[P],
        *,
        into: JobSink | None = None,
        dsn: str | None = None,
        kicker: Kicker | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[int]:
        """Many jobs of this task, same options each: in one commit of their own
        (`pgkick.enqueue_many`), or `into` a transaction someone else commits."""
        jobs = (_job(self.name, payload, options) for payload in payloads)
        if into is not None:
            many = getattr(into, "enqueue_many", None)
            if not callable(many):
                raise InvalidArgumentType(
                    f"{self.name}.enqueue_many: into must be where the jobs go "
                    f"(pgkick.transaction(conn), pgkick.enqueue_in(conn), ...), got "
                    f"{type(into).__name__}"
                )
            return list(many(jobs))
        from pgkick.producer.enqueue import enqueue_many

        _warn_if_on_event_loop(self.name)
        return enqueue_many(jobs, dsn=dsn, kicker=kicker)


def _job(name: str, payload: object, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"payload": to_json_value(payload), "task": name, **options}
