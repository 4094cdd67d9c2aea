"""The enqueue options, one type for every form that takes them.

Why one place: the nine fields of a job (payload, task and the seven options below)
were spelled out in each enqueue form (the producer's two, the asyncio producer's two,
a typed task's handle, the validation), with their defaults, and a new option had to
be added to all of them. Now each form takes `**options: Unpack[EnqueueOptions]` (or
`ProducerOptions`, for the forms that commit by themselves), mypy and pyright check
callers against it, and `pgkick.validation.job_spec` holds the defaults and the checks;
the per-job options themselves sit there, at the bottom, beside their checks. The
connection a transaction form takes is checked here too (check_connection).
"""

from typing import TYPE_CHECKING, Any, TypedDict, cast

from pgkick.connections.aio_db import is_async_connection
from pgkick.connections.db import Clock, is_connection, server_clock
from pgkick.errors import InvalidArgumentType, MisuseError
from pgkick.validation import JOB_FIELDS as JOB_FIELDS  # re-exported: the forms' one place
from pgkick.validation import EnqueueOptions as EnqueueOptions

if TYPE_CHECKING:
    from pgkick.kick.kickers import Kicker


class CommitOptions(TypedDict, total=False):
    """Where a form that commits by itself commits (None: DATABASE_URL), how it kicks
    (None: PGKICK_KICKER's kicker) and the clock its SQL takes for now."""

    dsn: str | None
    kicker: "Kicker | None"
    clock: Clock


class ProducerOptions(EnqueueOptions, CommitOptions, total=False):
    """Per-job options plus where to commit and how to kick (the forms that commit)."""


def where_to_commit(
    options: ProducerOptions | CommitOptions,
) -> tuple[str | None, "Kicker | None", Clock, EnqueueOptions]:
    """(dsn, kicker, clock) of a form that commits by itself, and the job's own options."""
    job: dict[str, Any] = dict(options)
    dsn, kicker = job.pop("dsn", None), job.pop("kicker", None)
    return dsn, kicker, job.pop("clock", server_clock), cast(EnqueueOptions, job)


def commit_only(form: str, where: CommitOptions) -> tuple[str | None, "Kicker | None", Clock]:
    """(dsn, kicker, clock) of a form that takes where to commit and nothing else (a batch,
    a workflow: each job's options are in its own mapping); anything else is refused, before
    anything connects. Why: `enqueue_many(jobs, priority=9)` wrote the jobs without it, no
    word said (a delay of an hour dropped, the jobs run at once: a review, 2026-12-05)."""
    dsn, kicker, clock, rest = where_to_commit(where)
    if rest:
        names = ", ".join(f"{name}=" for name in sorted(rest))
        raise InvalidArgumentType(
            f"{form}: takes no {names} (only dsn=, kicker=, clock=: each job's options go in "
            f"its own mapping, a workflow node's in its add()); nothing was written"
        )
    return dsn, kicker, clock


def check_connection(form: str, conn: object, *, asyncio: bool) -> None:
    """Refuse, before anything is written, a `conn` the transaction form cannot own, naming
    the form that takes it. Why: pgkick.transaction(an AsyncConnection) failed on the
    context manager protocol, and a DSN string, or pgkick.aio.transaction(a
    psycopg.Connection), on an AttributeError, none saying what to pass (a review, F4)."""
    if is_async_connection(conn) if asyncio else is_connection(conn):
        if cast(Any, conn).closed:  # else "must own the transaction": no help (a review)
            raise MisuseError(
                f"{form}(): the connection is closed; pass an open one (autocommit off, no "
                "transaction in progress)"
            )
        return
    wanted = "an AsyncConnection" if asyncio else "a psycopg 3 connection"
    if is_connection(conn) or is_async_connection(conn):
        instead = "pgkick.transaction" if asyncio else "pgkick.aio.transaction"
        hint = f"for a {type(conn).__name__} use {instead}(conn)"
    elif isinstance(conn, str):
        module = "pgkick.aio" if asyncio else "pgkick"
        hint = f"to enqueue on a DSN use {module}.enqueue_and_kick or enqueue_many (dsn=...)"
    else:
        hint = "open one with psycopg" + (".AsyncConnection.connect" if asyncio else ".connect")
    raise InvalidArgumentType(
        f"{form}: needs {wanted} with autocommit off, got {type(conn).__name__}; {hint}"
    )
