"""A task's return value, stored with its job, and how an app reads it back.

Why stored in the job row: the result is written by the same fenced statement
that marks the job done (job_complete_and_claim's or job_complete_many's), so a
job is never done without its result, and a worker that lost its lease stores
nothing. Why capped: the whole batch's results travel in that one statement; a
result of megabytes belongs in object storage, with its key here.

Reading: `result(job_id)` looks once; `wait(job_id, timeout=...)` looks again
with a growing pause (no LISTEN: a listening session would keep a scale-to-zero
database awake), only while the caller waits, on the producer's pool
(pgkick.connections.pool: a few connections shared by the process's threads, each
closed soon after its last use). Why the pool and not the one lingering connection:
there, a thread that found the connection busy opened one of its own for that look,
and 20 threads waiting at once opened 33-41 connections; with the pool they share at
most its size (4), a look waiting at worst one other look's round trip.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pgkick import config
from pgkick.connections import pool
from pgkick.connections.schema_advice import schema_advice
from pgkick.errors import (
    InvalidArgument,
    InvalidArgumentType,
    JobFailed,
    JobNotFinished,
    JobNotFound,
    RoleRefused,
)
from pgkick.validation import payload_json

if TYPE_CHECKING:
    from pgkick.store.producer import Outcome

MAX_RESULT_BYTES = 64 * 1024
FIRST_PAUSE = 0.05  # seconds between the first looks; doubles up to MAX_PAUSE
MAX_PAUSE = 1.0  # inside the producer connection's linger, so waiting reuses one session
MAX_WAIT = 15 * 60.0  # a longer wait is a job for a callback, not a loop
INSUFFICIENT_PRIVILEGE = "42501"  # the server's SQLSTATE for a privilege the role lacks


def encode_result(value: Any) -> str | None:
    """A task's return value as JSON text jsonb will store unchanged; None stores nothing.

    Raises TypeError/ValueError naming the problem (the worker fails the job for
    good with it: the same value would fail every retry)."""
    if value is None:
        return None
    try:
        return payload_json(value, MAX_RESULT_BYTES)
    except (TypeError, ValueError) as exc:
        message = str(exc).removeprefix("payload: ")
        raise type(exc)(
            f"result: {message} (results are JSON of at most {MAX_RESULT_BYTES} bytes,"
            " pgkick.tasks.results.MAX_RESULT_BYTES)"
        ) from None


@schema_advice  # no schema: say to migrate
def result(job_id: int, *, dsn: str | None = None) -> Any:
    """The job's stored result (None if its task returned nothing).

    Raises JobFailed (its final error), JobNotFinished, or JobNotFound (no such job: a
    LookupError)."""
    _check_id(job_id)
    return settled(job_id, _look(job_id, dsn))


@schema_advice  # no schema: say to migrate
def wait(
    job_id: int,
    *,
    timeout: float,
    dsn: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Any:
    """Look at the job until it is done (its result) or failed (JobFailed), for at most
    `timeout` seconds (then TimeoutError). Pauses grow from 50 ms to 1 s between looks."""
    check_wait(job_id, timeout)
    found, ended = looked_until(
        lambda: _look(job_id, dsn),
        lambda look: look[0] in ("done", "failed"),
        timeout,
        sleep=sleep,
        monotonic=monotonic,
    )
    if not ended:
        raise TimeoutError(f"job {job_id} still {found[0]} after {timeout} s")
    return settled(job_id, found)


def check_wait(job_id: object, timeout: object) -> None:
    """A wait's arguments, refused before anything connects (`wait`, `wait_async`)."""
    _check_id(job_id)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InvalidArgumentType(
            f"timeout: must be a number of seconds, got {type(timeout).__name__}"
        )
    if not 0 <= timeout <= MAX_WAIT:
        raise InvalidArgument(f"timeout: {timeout} s, must be between 0 and {MAX_WAIT:.0f}")


def looked_until[T](
    look: Callable[[], T],
    ended: Callable[[T], bool],
    timeout: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[T, bool]:
    """Look until `ended` says so or `timeout` seconds pass, pauses growing from 50 ms to 1 s
    (the one cadence of every wait for a job: `wait`, `pgkick enqueue`): the last look, and
    whether it ended."""
    deadline = monotonic() + timeout
    pause = FIRST_PAUSE
    while True:
        found = look()
        if ended(found):
            return found, True
        left = deadline - monotonic()
        if left <= 0:
            return found, False
        sleep(min(pause, left))
        pause = min(pause * 2, MAX_PAUSE)


def _look(job_id: int, dsn: str | None) -> tuple[str, Any, str | None]:
    # Imported here: the worker imports this module for encode_result, and a cold start
    # should not pay for the producer's statements it never sends.
    from pgkick.store.producer import ProducerStore

    settings = config.app_settings()
    shared = pool.shared(dsn or settings.dsn(), settings.producer_linger)
    with shared.connection() as conn:
        try:
            outcome = ProducerStore(conn).outcome(job_id)
        except Exception as exc:  # the read alone: a refused connection says so itself
            error = refused(job_id, exc)
            if error is exc:
                raise
            raise error from exc
    return found(job_id, outcome)


def refused(job_id: int, exc: Exception) -> Exception:
    """The read's error: RoleRefused, naming the roles that may read, for a privilege the
    role lacks; else the error itself."""
    if getattr(exc, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
        return exc
    reason = (str(exc).splitlines() or [""])[0]
    return RoleRefused(
        f"job {job_id}: this role may not read job outcomes ({reason}); read results "
        "as a role granted pgkick_worker or pgkick_maintainer: pgkick_producer "
        "enqueues but reads no job's status or result (docs/deploy/roles.md)"
    )


def found(job_id: int, outcome: Outcome | None) -> tuple[str, Any, str | None]:
    """A look's answer: status, result and last error; JobNotFound for no such job."""
    if outcome is None:
        raise JobNotFound(f"job {job_id} does not exist (or was purged)")
    return outcome.status, outcome.result, outcome.last_error


def settled(job_id: int, found: tuple[str, Any, str | None]) -> Any:
    status, value, error = found
    if status == "failed":
        raise JobFailed(job_id, error)
    if status != "done":
        raise JobNotFinished(job_id, status)
    return value


def _check_id(job_id: object) -> None:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InvalidArgumentType(f"job_id: must be an int, got {type(job_id).__name__}")
