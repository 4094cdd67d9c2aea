"""Configuration from the environment, the same for an app, a Lambda and the CLI.

Why environment variables: Lambda configures functions that way (template.yaml
sets them), and an app or a shell can do the same without code. The database
DSN comes from DATABASE_URL or, in Lambda, from a Secrets Manager secret read
through Powertools Parameters (cached across invocations, never logged).

Why one object read once: `Settings` (the worker's, built once per execution
environment by pgkick.worker.runtime and passed down) and `AppSettings` (the app
side's: the database, the schema, the producer's linger and kick timings, read once
per process environment by `app_settings()`) are the only readers of the environment;
nothing below them reads a variable. `overriding()` changes them for a block (the
CLI's --schema, the test kit's database) without writing os.environ. Defaults and
bounds come from `pgkick.variables.VARIABLES`, the table the docs are rendered from.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from urllib.parse import quote

from pgkick import variables as _variables
from pgkick.errors import ConfigError

# Re-exported: the table and its defaults, read through pgkick.config by the layers above.
DEFAULT_BATCH = _variables.DEFAULT_BATCH
DEFAULT_LEASE_SECONDS = _variables.DEFAULT_LEASE_SECONDS
DEFAULT_MAX_FANOUT = _variables.DEFAULT_MAX_FANOUT
DEFAULT_MAX_HOPS = _variables.DEFAULT_MAX_HOPS
DEFAULT_MIN_REMAINING_MS = _variables.DEFAULT_MIN_REMAINING_MS
DEFAULT_SCHEMA = _variables.DEFAULT_SCHEMA
DEFAULT_WATCH_SECONDS = _variables.DEFAULT_WATCH_SECONDS
KICKERS = _variables.KICKERS
VARIABLES = _variables.VARIABLES
Variable = _variables.Variable

# Nothing configured: enqueueing refuses (pgkick.kick.default.make_kicker says what to set),
# rather than silently spawning workers inside a web server or leaving jobs unkicked.
UNSET = "unset"
# Lowercase, as PostgreSQL folds unquoted names: the schema reads the same in psql.
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True, slots=True)
class Settings:
    kicker: str
    worker_function: str | None
    worker_arn: str | None
    scheduler_role_arn: str | None
    schedule_group: str
    batch: int
    lease: timedelta
    lease_margin: timedelta
    min_remaining: timedelta
    max_fanout: int
    fanout_after: timedelta  # a worker fans out once full batches kept coming this long
    backoff: timedelta
    backoff_cap: timedelta
    retention: timedelta
    task_modules: tuple[str, ...]
    local_concurrency: int
    connect_retries: int  # a resuming serverless compute can refuse the first connections
    worker_linger: timedelta  # an emptied queue is re-claimed this long before leaving
    worker_listen: str  # auto, on, off: a lingering worker LISTENs (pgkick.worker.linger)
    watch_ttl: timedelta  # a worker's announcement on its queue lives this long (pgkick.kick.watch)
    max_hops: int  # a worker chain invokes itself this many times, then hands over by a wake
    aws_timeout: float  # seconds to connect and to read, per AWS call attempt
    schema: str = DEFAULT_SCHEMA  # where pgkick's tables live (PGKICK_SCHEMA)
    schedule_dlq_arn: str | None = None  # wake-ups' and rescues' dead-letter queue

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        function = env.get("PGKICK_WORKER_FUNCTION") or None
        kicker = env.get("PGKICK_KICKER") or ("lambda" if function else UNSET)
        if kicker not in (*KICKERS, UNSET):
            raise ConfigError(f"PGKICK_KICKER={kicker!r}: expected one of {', '.join(KICKERS)}")
        if kicker == "lambda" and not function:
            raise ConfigError("PGKICK_KICKER=lambda needs PGKICK_WORKER_FUNCTION (name or ARN)")
        arn = env.get("PGKICK_WORKER_ARN") or (
            function if function and function.startswith("arn:") else None
        )
        return cls(
            kicker=kicker,
            worker_function=function,
            worker_arn=arn,
            scheduler_role_arn=env.get("PGKICK_SCHEDULER_ROLE_ARN") or None,
            schedule_group=env.get("PGKICK_SCHEDULE_GROUP")
            or _variables.default_text("PGKICK_SCHEDULE_GROUP"),
            batch=_variables.whole_number(env, "PGKICK_BATCH"),
            lease=timedelta(seconds=_variables.whole_number(env, "PGKICK_LEASE_SECONDS")),
            lease_margin=timedelta(
                seconds=_variables.whole_number(env, "PGKICK_LEASE_MARGIN_SECONDS")
            ),
            min_remaining=timedelta(
                milliseconds=_variables.whole_number(env, "PGKICK_MIN_REMAINING_MS")
            ),
            max_fanout=_variables.whole_number(env, "PGKICK_MAX_FANOUT"),
            fanout_after=timedelta(
                milliseconds=_variables.whole_number(env, "PGKICK_FANOUT_AFTER_MS")
            ),
            backoff=timedelta(milliseconds=_variables.whole_number(env, "PGKICK_BACKOFF_MS")),
            backoff_cap=timedelta(
                seconds=_variables.whole_number(env, "PGKICK_BACKOFF_CAP_SECONDS")
            ),
            retention=timedelta(days=_variables.whole_number(env, "PGKICK_RETENTION_DAYS")),
            task_modules=task_modules(env),
            local_concurrency=_variables.whole_number(env, "PGKICK_LOCAL_CONCURRENCY"),
            connect_retries=_variables.whole_number(env, "PGKICK_CONNECT_RETRIES"),
            worker_linger=timedelta(
                milliseconds=_variables.whole_number(env, "PGKICK_WORKER_LINGER_MS")
            ),
            worker_listen=_variables.choice(env, "PGKICK_WORKER_LISTEN"),
            watch_ttl=timedelta(seconds=_variables.whole_number(env, "PGKICK_WATCH_SECONDS")),
            max_hops=_variables.whole_number(env, "PGKICK_MAX_HOPS"),
            aws_timeout=_variables.whole_number(env, "PGKICK_AWS_TIMEOUT_MS") / 1000,
            schema=schema_name(env),
            schedule_dlq_arn=env.get("PGKICK_SCHEDULE_DLQ_ARN") or None,
        )


@dataclass(frozen=True, slots=True)
class AppSettings:
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
    def from_env(cls, env: Mapping[str, str]) -> AppSettings:
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
        from aws_lambda_powertools.utilities import parameters  # only where a secret is used

        secret = parameters.get_secret(self.database_secret_arn, max_age=300, force_fetch=fresh)
        text = secret.decode() if isinstance(secret, bytes) else str(secret)
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
_app: tuple[tuple[str | bytes | None, ...], AppSettings] | None = None
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
    cached = _app
    if cached is None or cached[0] != seen:
        cached = (seen, AppSettings.from_env(os.environ))
        with _app_lock:
            _app = cached
    return replace(cached[1], **_overrides) if _overrides else cached[1]  # type: ignore[arg-type]


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


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", re.ASCII)


def task_modules(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """PGKICK_TASKS: the modules that register the tasks, comma-separated (`myapp.tasks,
    billing.jobs`). Anything else (spaces between names, a path, a file name) is refused
    here, naming the setting, rather than failing later as a module that cannot be found."""
    raw = (os.environ if env is None else env).get("PGKICK_TASKS", "")
    names = [part.strip() for part in raw.split(",")]
    for name in names:
        if name and not _MODULE.fullmatch(name):
            hint = " (separate modules with commas, not spaces)" if " " in name else ""
            raise ConfigError(
                f"PGKICK_TASKS={raw!r}: {name!r} is not a module name{hint}; expected a "
                "comma-separated list of importable modules, e.g. PGKICK_TASKS=myapp.tasks"
            )
    return tuple(name for name in names if name)


def schema_name(env: Mapping[str, str] | None = None) -> str:
    """PGKICK_SCHEMA, the schema holding pgkick's tables: `pgkick` unless set."""
    env = os.environ if env is None else env
    return check_schema_name(
        env.get("PGKICK_SCHEMA") or _variables.default_text("PGKICK_SCHEMA"), "PGKICK_SCHEMA"
    )


def check_schema_name(name: str, source: str = "schema") -> str:
    """`name` if it is a schema pgkick can own, else a ConfigError naming the problem.

    Why so strict: the name is spliced into statements (quoted, but a surprise there
    is a surprise in every statement), and pg_* names are reserved by PostgreSQL."""
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        raise ConfigError(
            f"{source}={name!r}: expected a lowercase identifier "
            "(a-z, 0-9 and _, not starting with a digit, at most 63 characters)"
        )
    if name.startswith("pg_") or name == "information_schema":
        raise ConfigError(f"{source}={name!r}: names pg_* and information_schema are PostgreSQL's")
    return name


def producer_linger(env: Mapping[str, str] | None = None) -> float:
    """Seconds the producer's connection stays open after its last enqueue (0: never reused)."""
    env = os.environ if env is None else env
    return _variables.whole_number(env, "PGKICK_PRODUCER_LINGER_MS") / 1000


def failed_kick_wake(env: Mapping[str, str] | None = None) -> timedelta:
    """How long after a failed kick its wake-up is booked (the scheduler's minute)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_variables.whole_number(env, "PGKICK_FAILED_KICK_WAKE_MS"))


def kick_safety(env: Mapping[str, str] | None = None) -> timedelta:
    """How long after a kick (or a wake-up's time) its safety wake-up (pgkick.kick.safety)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_variables.whole_number(env, "PGKICK_KICK_SAFETY_MS"))


def kick_pending(env: Mapping[str, str] | None = None) -> timedelta:
    """How long a kick sent counts as a worker on its way (pgkick.kick.watch)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_variables.whole_number(env, "PGKICK_KICK_PENDING_MS"))


def xray_trace_header(env: Mapping[str, str] | None = None) -> str | None:
    """The X-Ray trace header Lambda sets for the current invocation (`_X_AMZN_TRACE_ID`,
    "Root=1-...;Parent=...;Sampled=1"), or None: the worker links it to each job's span
    (pgkick.worker.job_span). Read at every call: Lambda changes it per invocation."""
    env = os.environ if env is None else env
    return env.get("_X_AMZN_TRACE_ID") or None


def database_url(env: Mapping[str, str] | None = None, *, fresh: bool = False) -> str:
    """DATABASE_URL, else the DSN in the secret PGKICK_DATABASE_SECRET_ARN names (`fresh`:
    read past the 5-minute cache)."""
    return (app_settings() if env is None else AppSettings.from_env(env)).dsn(fresh=fresh)


def secret_rotated(dsn: Callable[[], str]) -> Callable[[], str] | None:
    """How to read the DSN past the secret's cache, when `dsn` is config's own and a secret
    (not DATABASE_URL) supplies it: else None (nothing cached, nothing to refetch)."""
    if dsn is not database_url:
        return None
    settings = app_settings()
    if settings.database_url or not settings.database_secret_arn:
        return None
    return lambda: database_url(fresh=True)


def test_database_url() -> str | None:
    """The server pgkick's pytest plugin creates its test databases on:
    PGKICK_TEST_DATABASE_URL, else DATABASE_URL, else None (the embedded PostgreSQL)."""
    return os.environ.get("PGKICK_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL") or None


def dsn_from_secret(text: str) -> str:
    """Accept a plain DSN, {"url": ...}, or the RDS secret shape (username, password, host...)."""
    if text.startswith(("postgresql://", "postgres://")):
        return text
    try:
        data = json.loads(text)
    except ValueError:
        raise ConfigError("database secret: neither a postgresql:// URL nor JSON") from None
    if isinstance(data, dict) and isinstance(data.get("url"), str):
        return str(data["url"])
    if not isinstance(data, dict) or not {"username", "password", "host"} <= data.keys():
        raise ConfigError("database secret: JSON needs url, or username, password and host")
    user, password = quote(str(data["username"]), ""), quote(str(data["password"]), "")
    port = data.get("port", 5432)
    if isinstance(port, bool) or not str(port).isdigit():  # the message never echoes values
        raise ConfigError("database secret: port must be a whole number")
    dbname = quote(str(data.get("dbname", "postgres")), "")
    query = f"?sslmode={data['sslmode']}" if data.get("sslmode") else ""
    return f"postgresql://{user}:{password}@{data['host']}:{port}/{dbname}{query}"
