"""Every error pgkick raises on purpose, under one root: `except pgkick.PgkickError`.

Why one module: an app catches pgkick's failures without importing the modules
that raise them (the worker, the store, the schema), and each class says what
went wrong in terms an operator can act on. The classes that were ValueError or
RuntimeError before keep those bases, so existing `except ValueError` code still
catches them.
"""

from __future__ import annotations


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


class PermanentError(PgkickError):
    """Raised by a task: fail the job now, do not retry it."""
