"""The app side's settings: what a producer, the results, the CLI and the test kit read.

Why apart from the worker's `Settings`: the app side reads its settings at every call (several
a job on the producer's path), so they are parsed once per process environment and cached
by the environment's values, and `overriding()` changes them for a block (the CLI's
--schema, the test kit's database) without writing os.environ. The database's DSN is
resolved here too: DATABASE_URL, else the Secrets Manager secret read through Powertools
Parameters (cached across invocations, never logged), which the worker reads as well.
"""

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import NamedTuple

from pgkick.config.readers import (
    check_schema_name,
    dsn_from_secret,
    failed_kick_wake,
    kick_pending,
    kick_safety,
    producer_linger,
    schema_name,
)
from pgkick.errors import ConfigError


class AppSettings(NamedTuple):
    """What the app side reads (producer, results, the CLI, the test kit): read once per
    process environment by `app_settings()`, then passed to the layers below."""

    database_url: str | None  # DATABASE_URL, else None (then the secret, if named)
    database_secret_arn: str | None
    schema: str
    producer_linger: float  # seconds a producer's connection outlives its last use
    kick_pending: timedelta  # how long a kick sent counts as a worker on its way
    failed_kick_wake: timedelta  # how long after a failed kick its wake-up is booked
    kick_safety: timedelta  # how long after a kick or a wake-up its safety wake-up (0: none)
    tasks_variable: str  # PGKICK_TASKS as set (errors about an unknown task quote it)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "AppSettings":
        return cls(
            database_url=env.get("DATABASE_URL") or None,
            database_secret_arn=env.get("PGKICK_DATABASE_SECRET_ARN") or None,
            schema=schema_name(env),
            producer_linger=producer_linger(env),
            kick_pending=kick_pending(env),
            failed_kick_wake=failed_kick_wake(env),
            kick_safety=kick_safety(env),
            tasks_variable=env.get("PGKICK_TASKS", ""),
        )

    def dsn(self, *, fresh: bool = False) -> str:
        """The database's DSN: DATABASE_URL, else the secret's (cached 5 minutes; `fresh`
        reads it again: after a password rotation the cached one fails to authenticate)."""
        if self.database_url:
            return self.database_url
        if not self.database_secret_arn:
            raise ConfigError("no database: set DATABASE_URL or PGKICK_DATABASE_SECRET_ARN")
        from pgkick.awsapi import secrets  # inside Lambda: no boto3 on the cold start

        text = secrets.read(self.database_secret_arn, max_age=300, fresh=fresh)
        return dsn_from_secret(text)


_APP_NAMES = (  # what AppSettings reads: the cache's key is their values
    "DATABASE_URL",
    "PGKICK_DATABASE_SECRET_ARN",
    "PGKICK_SCHEMA",
    "PGKICK_PRODUCER_LINGER_MS",
    "PGKICK_KICK_PENDING_MS",
    "PGKICK_FAILED_KICK_WAKE_MS",
    "PGKICK_KICK_SAFETY_MS",
    "PGKICK_TASKS",
)
# The cache's key is read at every call (several a job on the producer's path): through
# os.environ's mapping that costs ~1.7 us a name (each key encoded, each value decoded),
# about 14 us for the eight; CPython keeps the raw bytes in os.environ._data, which os.environ's
# own writes (and monkeypatch's) update, and comparing those bytes costs 1.6 us for all.
_RAW_ENVIRON: dict[bytes, bytes] | None = getattr(os.environ, "_data", None)
_APP_KEYS = tuple(name.encode() for name in _APP_NAMES)
_app_lock = threading.Lock()
_app: tuple[tuple[str | bytes | bool | None, ...], AppSettings] | None = None
_overrides: dict[str, object] = {}


def app_settings() -> AppSettings:
    """The app side's settings, parsed once for the environment as it is (a process whose
    environment changes, a test's, gets them parsed again), with `overriding()` applied."""
    global _app
    raw = _RAW_ENVIRON
    seen = (
        tuple(map(raw.get, _APP_KEYS))
        if isinstance(raw, dict)
        else tuple(os.environ.get(name) for name in _APP_NAMES)
    )
    flagged = "schema" in _overrides  # the CLI's --schema: PGKICK_SCHEMA is not read at all
    key = (*seen, flagged)
    cached = _app
    if cached is None or cached[0] != key:
        cached = (key, AppSettings.from_env(_without_schema() if flagged else os.environ))
        with _app_lock:
            _app = cached
    return cached[1]._replace(**_overrides) if _overrides else cached[1]  # type: ignore[arg-type]


def _without_schema() -> dict[str, str]:
    """The environment less PGKICK_SCHEMA. Why: a schema given explicitly (the CLI's
    --schema, through `overriding`) wins, and a bad PGKICK_SCHEMA refused the command
    before the flag replaced it; the variable only matters when nothing names a schema."""
    return {name: value for name, value in os.environ.items() if name != "PGKICK_SCHEMA"}


def schema_overridden() -> str | None:
    """The schema `overriding()` names for this block (the CLI's --schema), if any: the
    worker's Settings take it instead of PGKICK_SCHEMA, as the app side's do."""
    schema = _overrides.get("schema")
    return schema if isinstance(schema, str) else None


@contextmanager
def overriding(
    *,
    schema: str | None = None,
    database_url: str | None = None,
    kick_safety: timedelta | None = None,
) -> Iterator[None]:
    """Use this schema or database for the block, process-wide (the CLI's --schema, the
    test kit's database, and its in-process kicks, which need no safety wake-up), instead
    of writing os.environ."""
    changes: dict[str, object] = {}
    if kick_safety is not None:
        changes["kick_safety"] = kick_safety
    if schema is not None:
        changes["schema"] = check_schema_name(schema)
    if database_url is not None:
        changes["database_url"] = database_url
    before = dict(_overrides)
    _overrides.update(changes)
    try:
        yield
    finally:
        _overrides.clear()
        _overrides.update(before)


def database_url(env: Mapping[str, str] | None = None, *, fresh: bool = False) -> str:
    """DATABASE_URL, else the DSN in the secret PGKICK_DATABASE_SECRET_ARN names (`fresh`:
    read past the 5-minute cache)."""
    return (app_settings() if env is None else AppSettings.from_env(env)).dsn(fresh=fresh)


def rotated_secret_dsn(dsn: str) -> str | None:
    """The DSN read again from Secrets Manager when `dsn` is the one the secret's cache
    gave and the secret now holds another (its password rotated): else None (DATABASE_URL
    set, no secret, a DSN given by the caller, or the secret unchanged: nothing to retry).

    Why: the secret is cached 5 minutes; after a rotation the cached password fails to
    authenticate, and every new connection (a worker's invocation, a producer's enqueue)
    would fail until the cache expired. `pgkick.connections.db.connect` asks here once
    when the server refuses a password."""
    settings = app_settings()
    if settings.database_url or not settings.database_secret_arn:
        return None
    if dsn != settings.dsn():  # the cache's DSN (no call to AWS): else not the secret's
        return None
    fresh = settings.dsn(fresh=True)
    return fresh if fresh != dsn else None
