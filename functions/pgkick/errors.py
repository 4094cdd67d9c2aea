"""Every error pgkick raises on purpose, under one root: `except pgkick.PgkickError`.

Why one module: an app catches pgkick's failures without importing the modules
that raise them (the worker, the store, the schema), and each class says what
went wrong in terms an operator can act on. The classes that were ValueError or
RuntimeError before keep those bases, so existing `except ValueError` code still
catches them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar


class PgkickError(Exception):
    """The root of every error pgkick raises on purpose."""


class ConfigError(PgkickError, ValueError):
    """A setting is missing or malformed; raised before anything is written."""


class SchemaError(PgkickError, RuntimeError):
    """The database's schema is missing, behind, or ahead of this code."""


class DatabaseUnavailable(PgkickError, RuntimeError):
    """The database could not be reached (after the retries a cold start deserves)."""


class BadEvent(PgkickError, ValueError):
    """A Lambda event that is not a kick: answered as rejected, never retried."""


class UnknownTask(PgkickError, ValueError):
    """A task name this process's registry does not know (after `pgkick.load_tasks()`)."""


class PermanentError(PgkickError):
    """Raised by a task: fail the job now, do not retry it."""


# errors.py stays importable by an older Python (tests/test_embedded.py copies it): no
# PEP 695 syntax here.
F = TypeVar("F", bound=Callable[..., Any])

# SQLSTATEs a statement of pgkick's gets on a database never migrated (or another schema):
# undefined_table, invalid_schema_name, undefined_function (job_claim & co).
_MISSING = frozenset({"42P01", "3F000", "42883"})
MIGRATE_ADVICE = (
    "run `pgkick migrate` (or `pgkick.migrate(dsn)` from Python) on this database first"
)


def missing_schema(exc: BaseException) -> SchemaError | None:
    """The SchemaError to raise instead of `exc` when `exc` is the server saying pgkick's
    schema is not there, else None. Why from the SQLSTATE and the message: only an error
    naming pgkick's own objects is translated, never one from the app's statements."""
    if getattr(exc, "sqlstate", None) not in _MISSING:
        return None
    from pgkick import config  # config raises ConfigError from here: imported when needed

    message = (str(exc).splitlines() or [""])[0]
    words = set(message.replace('"', " ").replace(".", " ").split())
    if not {"pgkick", config.schema_name()} & words:
        return None
    return SchemaError(f"pgkick's schema is missing here ({message}): {MIGRATE_ADVICE}")


def schema_advice(fn: F) -> F:  # noqa: UP047 (see F)
    """Decorator for a library entry point (sync or async): a missing schema surfaces as
    SchemaError saying to migrate, not as psycopg's UndefinedTable naming a relation."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                translated = missing_schema(exc)
                if translated is None:
                    raise
                raise translated from exc

        return guarded_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            translated = missing_schema(exc)
            if translated is None:
                raise
            raise translated from exc

    return guarded  # type: ignore[return-value]
