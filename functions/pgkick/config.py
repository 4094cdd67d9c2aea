"""Configuration from the environment, the same for an app, a Lambda and the CLI.

Why environment variables: Lambda configures functions that way (template.yaml
sets them), and an app or a shell can do the same without code. The database
DSN comes from DATABASE_URL or, in Lambda, from a Secrets Manager secret read
through Powertools Parameters (cached across invocations, never logged).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote

from pgkick.errors import ConfigError

KICKERS = ("lambda", "local", "none")
# The worker loop's defaults, here once: Settings reads them from the environment,
# pgkick.worker.loop.WorkerOptions defaults to them.
DEFAULT_BATCH = 10
DEFAULT_LEASE_SECONDS = 300
DEFAULT_MIN_REMAINING_MS = 2000
DEFAULT_MAX_FANOUT = 1
DEFAULT_WATCH_SECONDS = 5
DEFAULT_MAX_HOPS = 12
# Nothing configured: enqueueing refuses (pgkick.kick.default.make_kicker says what to set),
# rather than silently spawning workers inside a web server or leaving jobs unkicked.
UNSET = "unset"
DEFAULT_SCHEMA = "pgkick"
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
    watch_ttl: timedelta  # a worker's announcement on its queue lives this long (pgkick.kick.watch)
    max_hops: int  # a worker chain invokes itself this many times, then hands over by a wake
    aws_timeout: float  # seconds to connect and to read, per AWS call attempt
    schema: str = DEFAULT_SCHEMA  # where pgkick's tables live (PGKICK_SCHEMA)

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
            schedule_group=env.get("PGKICK_SCHEDULE_GROUP") or "default",
            batch=_int(env, "PGKICK_BATCH", DEFAULT_BATCH, 1, 1000),
            lease=timedelta(
                seconds=_int(env, "PGKICK_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, 1, 86_400)
            ),
            lease_margin=timedelta(seconds=_int(env, "PGKICK_LEASE_MARGIN_SECONDS", 30, 0, 3600)),
            min_remaining=timedelta(
                milliseconds=_int(
                    env, "PGKICK_MIN_REMAINING_MS", DEFAULT_MIN_REMAINING_MS, 0, 900_000
                )
            ),
            max_fanout=_int(env, "PGKICK_MAX_FANOUT", DEFAULT_MAX_FANOUT, 0, 100),
            fanout_after=timedelta(
                milliseconds=_int(env, "PGKICK_FANOUT_AFTER_MS", 1000, 0, 900_000)
            ),
            backoff=timedelta(milliseconds=_int(env, "PGKICK_BACKOFF_MS", 10_000, 1, 3_600_000)),
            backoff_cap=timedelta(seconds=_int(env, "PGKICK_BACKOFF_CAP_SECONDS", 3600, 1, 86_400)),
            retention=timedelta(days=_int(env, "PGKICK_RETENTION_DAYS", 7, 0, 36_500)),
            task_modules=task_modules(env),
            local_concurrency=_int(env, "PGKICK_LOCAL_CONCURRENCY", 4, 1, 256),
            connect_retries=_int(env, "PGKICK_CONNECT_RETRIES", 3, 0, 10),
            worker_linger=timedelta(
                milliseconds=_int(env, "PGKICK_WORKER_LINGER_MS", 1000, 0, 60_000)
            ),
            watch_ttl=timedelta(
                seconds=_int(env, "PGKICK_WATCH_SECONDS", DEFAULT_WATCH_SECONDS, 1, 3600)
            ),
            max_hops=_int(env, "PGKICK_MAX_HOPS", DEFAULT_MAX_HOPS, 1, 15),
            aws_timeout=_int(env, "PGKICK_AWS_TIMEOUT_MS", 2000, 100, 60_000) / 1000,
            schema=schema_name(env),
        )


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a whole number") from None
    if not low <= value <= high:
        raise ConfigError(f"{name}={value}: expected {low}..{high}")
    return value


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
    return check_schema_name(env.get("PGKICK_SCHEMA") or DEFAULT_SCHEMA, "PGKICK_SCHEMA")


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
    return _int(env, "PGKICK_PRODUCER_LINGER_MS", 1000, 0, 60_000) / 1000


def failed_kick_wake(env: Mapping[str, str] | None = None) -> timedelta:
    """How long after a failed kick its wake-up is booked (the scheduler's minute)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_int(env, "PGKICK_FAILED_KICK_WAKE_MS", 60_000, 0, 3_600_000))


def kick_pending(env: Mapping[str, str] | None = None) -> timedelta:
    """How long a kick sent counts as a worker on its way (pgkick.kick.watch)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_int(env, "PGKICK_KICK_PENDING_MS", 10_000, 100, 3_600_000))


def database_url(env: Mapping[str, str] | None = None) -> str:
    """DATABASE_URL, else the DSN in the secret PGKICK_DATABASE_SECRET_ARN names."""
    env = os.environ if env is None else env
    if env.get("DATABASE_URL"):
        return env["DATABASE_URL"]
    arn = env.get("PGKICK_DATABASE_SECRET_ARN")
    if not arn:
        raise ConfigError("no database: set DATABASE_URL or PGKICK_DATABASE_SECRET_ARN")
    from aws_lambda_powertools.utilities import parameters  # only where a secret is used

    secret = parameters.get_secret(arn, max_age=300)
    text = secret.decode() if isinstance(secret, bytes) else str(secret)
    return dsn_from_secret(text)


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
