"""Typed task handles: what `@pgkick.task("name")` returns.

Why a handle: with a string name and an untyped payload, nothing checks that a
caller's payload matches the task; a typo or a missing field becomes a job that
fails in a worker minutes later. The handle carries the task's name and its
payload type `P` (read from the function's first parameter), so
`send_receipt.enqueue_and_kick({"order": 42})` is checked by mypy or pyright
against the TypedDict, dataclass or pydantic model the task declares.

Dataclass and pydantic payloads are turned into plain JSON values before the
usual validation (the row holds JSON), and turned back into the declared type
before the task runs (pgkick.tasks.payloads); the handle rebuilds each one from its
JSON before writing it, so a type whose jobs could never run is refused at enqueue.
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

import inspect
import sys
import warnings
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Unpack, cast, overload

from pgkick.errors import InvalidArgumentType
from pgkick.producer.options import EnqueueOptions, ProducerOptions
from pgkick.tasks.payloads import Loader, payload_loader, survives, to_json_value

if TYPE_CHECKING:
    from pgkick.kick.kickers import Kicker
    from pgkick.tasks.workflow import AsyncManyJobSink

__all__ = [
    "EnqueueOptions",
    "JobSink",
    "ProducerOptions",
    "Task",
    "payload_loader",
    "to_json_value",
]


class JobSink(Protocol):
    """Anything jobs can be enqueued into: `pgkick.transaction(conn)`'s enqueuer, the
    pending jobs of `pgkick.enqueue_in(conn)`, the Django and SQLAlchemy forms."""

    def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int: ...


class AsyncJobSink(Protocol):
    """Where an asyncio app's jobs go: `pgkick.aio.transaction(conn)`'s enqueuer."""

    def enqueue(
        self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]
    ) -> Coroutine[Any, Any, int]: ...


_ENQUEUE_OPTIONS = frozenset(EnqueueOptions.__optional_keys__)
_PRODUCER_OPTIONS = frozenset(ProducerOptions.__optional_keys__)
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


class Task[P]:
    """A registered task: its name, its function, and typed ways to enqueue it."""

    def __init__(self, name: str, fn: Callable[..., Any], load: Loader | None = None) -> None:
        self.name = name
        self.fn = fn
        self.load = load  # how the worker rebuilds the payload type (None: plain JSON)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the task's function directly (a unit test of the task's own logic)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<pgkick task {self.name!r}>"

    def json_value(self, payload: object) -> object:
        """`payload` as the row will hold it; a dataclass or model the worker could not
        rebuild from that JSON is refused here (InvalidArgumentType), before any write."""
        value = to_json_value(payload)
        if value is not payload and self.load is not None:
            why = survives(payload, value, self.load)
            if why is not None:
                raise InvalidArgumentType(
                    f"task {self.name!r}: a {type(payload).__qualname__} payload does not "
                    f"survive its trip through JSON, so every attempt would fail ({why}); "
                    f"nothing was written"
                )
        return value

    def enqueue_and_kick(self, payload: P, **options: Unpack[ProducerOptions]) -> int:
        """Commit one job on pgkick's own connection, then kick (`pgkick.enqueue_and_kick`)."""
        from pgkick.producer.enqueue import enqueue_and_kick

        self._refuse_own_fields("enqueue_and_kick", options, _PRODUCER_OPTIONS)
        _warn_if_on_event_loop(self.name)
        return enqueue_and_kick(self.json_value(payload), task=self.name, **options)

    async def enqueue_and_kick_async(self, payload: P, **options: Unpack[ProducerOptions]) -> int:
        """The same on the event loop's own connections (`pgkick.aio.enqueue_and_kick`)."""
        from pgkick import aio

        self._refuse_own_fields("enqueue_and_kick_async", options, _PRODUCER_OPTIONS)
        return await aio.enqueue_and_kick(self.json_value(payload), task=self.name, **options)

    async def enqueue_many_async(
        self,
        payloads: Iterable[P],
        *,
        into: AsyncManyJobSink | None = None,
        dsn: str | None = None,
        kicker: Kicker | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[int]:
        """Many jobs of this task in one commit, then one kick per queue (`pgkick.aio`), or
        `into` an asyncio app's transaction (`pgkick.aio.transaction(conn)`,
        `pgkick.aio.enqueue_in(conn)`; its connection and kicker: dsn and kicker refused)."""
        from pgkick import aio

        self._refuse_own_fields("enqueue_many_async", options, _ENQUEUE_OPTIONS)
        jobs = [self._job(payload, options) for payload in payloads]
        if into is None:
            return await aio.enqueue_many(jobs, dsn=dsn, kicker=kicker)
        many = self._sink_many("enqueue_many_async", into, dsn, kicker)
        if not inspect.iscoroutinefunction(many):  # called, a sync sink writes on the loop
            raise InvalidArgumentType(
                f"{self.name}.enqueue_many_async: into must be an asyncio app's transaction "
                f"(pgkick.aio.transaction(conn), pgkick.aio.enqueue_in(conn)), got "
                f"{type(into).__name__}; for a synchronous one use "
                f"{self.name}.enqueue_many(into=...)"
            )
        return list(await many(jobs))

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
        self._refuse_own_fields("enqueue", options, _ENQUEUE_OPTIONS)
        return into.enqueue(self.json_value(payload), task=self.name, **options)

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
        (`pgkick.enqueue_many`, on `dsn`, kicked by `kicker`), or `into` a transaction
        someone else commits (its connection and kicker: dsn and kicker are refused)."""
        self._refuse_own_fields("enqueue_many", options, _ENQUEUE_OPTIONS)
        jobs = (self._job(payload, options) for payload in payloads)
        if into is not None:
            many = self._sink_many("enqueue_many", into, dsn, kicker)
            if inspect.iscoroutinefunction(many):  # called, it is a coroutine never awaited
                raise InvalidArgumentType(
                    f"{self.name}.enqueue_many: into is an asyncio app's transaction "
                    f"({type(into).__name__}); await {self.name}.enqueue_many_async(into=...)"
                )
            return list(many(jobs))
        from pgkick.producer.enqueue import enqueue_many

        _warn_if_on_event_loop(self.name)
        return enqueue_many(jobs, dsn=dsn, kicker=kicker)

    def _sink_many(
        self, form: str, into: object, dsn: str | None, kicker: Kicker | None
    ) -> Callable[..., Any]:
        """`into`'s enqueue_many, or a refusal before anything is written: dsn= and kicker=
        beside it (they were ignored without a word: the transaction's own are used), or
        an `into` that takes no jobs."""
        given = [name for name, value in (("dsn", dsn), ("kicker", kicker)) if value]
        if given:
            raise InvalidArgumentType(
                f"{self.name}.{form}: into= takes no {', '.join(n + '=' for n in given)} (the "
                f"jobs go into that transaction's connection, kicked by its kicker); pass one "
                f"or the other"
            )
        many = getattr(into, "enqueue_many", None)
        if not callable(many):
            raise InvalidArgumentType(
                f"{self.name}.{form}: into must be where the jobs go "
                f"(pgkick.transaction(conn), pgkick.enqueue_in(conn), ...), got "
                f"{type(into).__name__}"
            )
        return cast("Callable[..., Any]", many)

    def _refuse_own_fields(
        self, form: str, options: Mapping[str, Any], allowed: frozenset[str]
    ) -> None:
        """Refuse `task=`, `payload=` or any name that is not an option, before any write.

        Why: enqueue_many spreads the options over each job's fields, so `task="other"`
        wrote jobs of another task and `payload=` one payload for all, silently (a review,
        F3); the single forms failed with Python's 'multiple values for keyword argument'."""
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise InvalidArgumentType(
                f"{self.name}.{form}: takes no {', '.join(n + '=' for n in unknown)} (the "
                f"handle gives the task and payload; its options: {', '.join(sorted(allowed))});"
                f" nothing was written"
            )

    def _job(self, payload: object, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"payload": self.json_value(payload), "task": self.name, **options}
