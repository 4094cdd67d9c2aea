"""A missing schema named as such: "run `pgkick migrate`", not psycopg's UndefinedTable.

Why a decorator on the library's entry points (sync and async): an app that forgot to
migrate meets pgkick first through enqueue_and_kick, result or wait; the server's
error names a relation, not what to do. Only an error naming pgkick's own objects is
translated, never one from the app's own statements.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from pgkick import config
from pgkick.errors import SchemaError

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
    message = (str(exc).splitlines() or [""])[0]
    words = set(message.replace('"', " ").replace(".", " ").split())
    schema = config.app_settings().schema
    if not {"pgkick", schema} & words:
        return None
    return SchemaError(f"pgkick's schema is missing here ({message}): {migrate_advice(schema)}")


def migrate_advice(schema: str) -> str:
    """What to run: for another schema than pgkick's, `--schema` named, as the worker's and the
    CLI's check say (a bare `pgkick migrate` from a shell without PGKICK_SCHEMA makes schema
    pgkick, and the app still fails)."""
    if schema == config.DEFAULT_SCHEMA:
        return MIGRATE_ADVICE
    return (
        f"run `pgkick migrate --schema {schema}` (or `pgkick.migrate(dsn, schema={schema!r})` "
        "from Python) on this database first"
    )


def schema_advice[F: Callable[..., Any]](fn: F) -> F:
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
