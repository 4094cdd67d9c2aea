"""Configuration from the environment, the same for an app, a Lambda and the CLI.

Why environment variables: Lambda configures functions that way (template.yaml
sets them), and an app or a shell can do the same without code. The database
DSN comes from DATABASE_URL or, in Lambda, from a Secrets Manager secret read
through Powertools Parameters (cached across invocations, never logged).

Why a table: `VARIABLES` lists every variable pgkick reads, with its default, its
bounds and one line on what it does. `Settings.from_env` and the helpers below take
defaults and bounds from it, and the documentation's configuration reference is
rendered from it at build time (docs/hooks/reference.py), so the page and the code
cannot drift; tests/test_docs.py checks that every name the runtime mentions is here.
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
class Variable:
    """One environment variable pgkick reads. An empty value counts as unset.

    `default` is the value when unset (None: no default); a variable with bounds is a
    whole number in `low..high`, in `unit` ("" for a count)."""

    name: str
    default: int | str | None
    description: str
    low: int | None = None
    high: int | None = None
    unit: str = ""
    choices: tuple[str, ...] = ()


def _n(name: str, default: int, low: int, high: int, unit: str, description: str) -> Variable:
    return Variable(name, default, description, low, high, unit)


# One entry a variable: name, default (bounds, unit), then what it does. Laid out by hand.
# fmt: off
VARIABLES: tuple[Variable, ...] = (
    Variable("DATABASE_URL", None,
             "The PostgreSQL DSN (app, worker, reaper; the CLI's `--dsn` default). "
             "Empty in Lambda, where the secret below is read instead."),
    Variable("PGKICK_DATABASE_SECRET_ARN", None,
             "Secrets Manager secret holding the DSN, read when `DATABASE_URL` is empty: a "
             "`postgresql://` URL, `{\"url\": ...}` or the RDS shape. Cached 5 minutes, never "
             "logged."),
    Variable("PGKICK_KICKER", None,
             "How a kick is delivered. Default `lambda` when `PGKICK_WORKER_FUNCTION` is set; "
             "unset, enqueueing raises `ConfigError` before writing. `local` needs pgkick-dev.",
             choices=KICKERS),
    Variable("PGKICK_WORKER_FUNCTION", None,
             "The worker Lambda's name or ARN, which the `lambda` kicker invokes (the stack "
             "names it `<stack>-worker`)."),
    Variable("PGKICK_WORKER_ARN", None,
             "The worker's ARN, target of wake-ups, rescues and periodic schedules. Default: "
             "`PGKICK_WORKER_FUNCTION` when that is an ARN."),
    Variable("PGKICK_SCHEDULER_ROLE_ARN", None,
             "The role EventBridge Scheduler assumes to invoke the worker. Without it (or a "
             "worker ARN) no wake-up is booked and the reaper is the fallback."),
    Variable("PGKICK_SCHEDULE_GROUP", "default",
             "The Scheduler group of wake-ups, rescues and periodic schedules."),
    Variable("PGKICK_TASKS", "",
             "Comma-separated modules the worker imports to register its tasks, e.g. "
             "`orders_app.tasks,orders_app.reports` (blanks around names ignored). Empty: "
             "the built-in `noop` only."),
    Variable("PGKICK_SCHEMA", DEFAULT_SCHEMA,
             "The schema of pgkick's tables: a lowercase identifier (`a-z`, `0-9`, `_`; at most "
             "63 characters; not `pg_*`). Set it everywhere: app, worker, reaper, CLI."),
    _n("PGKICK_BATCH", DEFAULT_BATCH, 1, 1000, "jobs",
       "Jobs a worker claims at once."),
    _n("PGKICK_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, 1, 86_400, "s",
       "A claimed job's lease: the longer of this and the invocation's remaining time plus "
       "`PGKICK_LEASE_MARGIN_SECONDS`."),
    _n("PGKICK_LEASE_MARGIN_SECONDS", 30, 0, 3600, "s",
       "How long a lease outlasts the invocation, so a rescue never overlaps a live worker "
       "(the template sets 60)."),
    _n("PGKICK_MIN_REMAINING_MS", DEFAULT_MIN_REMAINING_MS, 0, 900_000, "ms",
       "A worker stops claiming when the Lambda time left is below its longest batch plus "
       "this, then hands over."),
    _n("PGKICK_MAX_FANOUT", DEFAULT_MAX_FANOUT, 0, 100, "kicks",
       "Extra workers a worker kicks once full batches kept coming (0: it never fans out)."),
    _n("PGKICK_FANOUT_AFTER_MS", 1000, 0, 900_000, "ms",
       "How long full batches must keep coming before a worker fans out (about a cold "
       "start)."),
    _n("PGKICK_BACKOFF_MS", 10_000, 1, 3_600_000, "ms",
       "A retry waits this x 2^attempts, at most `PGKICK_BACKOFF_CAP_SECONDS`, times a jitter "
       "of 0.9..1.1."),
    _n("PGKICK_BACKOFF_CAP_SECONDS", 3600, 1, 86_400, "s",
       "The longest retry backoff."),
    _n("PGKICK_RETENTION_DAYS", 7, 0, 36_500, "days",
       "The reaper purges done and failed jobs (and periodic ticks) older than this."),
    _n("PGKICK_LOCAL_CONCURRENCY", 4, 1, 256, "environments",
       "The local kicker's execution environments at once (`PGKICK_KICKER=local`); more "
       "events wait, as throttles."),
    _n("PGKICK_CONNECT_RETRIES", 3, 0, 10, "retries",
       "Connection attempts retried with backoff (a resuming serverless compute can refuse "
       "the first ones)."),
    _n("PGKICK_WORKER_LINGER_MS", 1000, 0, 60_000, "ms",
       "How long a worker whose claim came back empty keeps re-claiming before it withdraws "
       "(0: it leaves at once)."),
    _n("PGKICK_WATCH_SECONDS", DEFAULT_WATCH_SECONDS, 1, 3600, "s",
       "How long a worker's announcement on its queue is valid: the latest it promises to "
       "claim again."),
    _n("PGKICK_MAX_HOPS", DEFAULT_MAX_HOPS, 1, 15, "hops",
       "Self-invocations in a worker chain before it hands over by a wake-up (Lambda stops "
       "loops after about 16)."),
    _n("PGKICK_AWS_TIMEOUT_MS", 2000, 100, 60_000, "ms",
       "Connect and read timeout of each AWS call attempt (2 attempts), so an endpoint that "
       "never answers holds no caller."),
    _n("PGKICK_PRODUCER_LINGER_MS", 1000, 0, 60_000, "ms",
       "How long a producer's connection stays open after its last enqueue, for the next "
       "call (0: a connection per call)."),
    _n("PGKICK_FAILED_KICK_WAKE_MS", 60_000, 0, 3_600_000, "ms",
       "After a failed kick, its wake-up is booked this far out (the scheduler's minute)."),
    _n("PGKICK_KICK_PENDING_MS", 10_000, 100, 3_600_000, "ms",
       "How long a reserved kick counts as a worker on its way, so racing producers send "
       "one kick."),
    Variable("POWERTOOLS_SERVICE_NAME", "pgkick-worker, pgkick-reaper",
             "The Lambda handlers' logger service (the template sets `<stack>-worker`, "
             "`<stack>-reaper`)."),
    Variable("POWERTOOLS_METRICS_NAMESPACE", "pgkick",
             "The Lambda handlers' metrics namespace."),
)
# fmt: on
_VARIABLE = {variable.name: variable for variable in VARIABLES}


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
            schedule_group=env.get("PGKICK_SCHEDULE_GROUP") or _text("PGKICK_SCHEDULE_GROUP"),
            batch=_setting(env, "PGKICK_BATCH"),
            lease=timedelta(seconds=_setting(env, "PGKICK_LEASE_SECONDS")),
            lease_margin=timedelta(seconds=_setting(env, "PGKICK_LEASE_MARGIN_SECONDS")),
            min_remaining=timedelta(milliseconds=_setting(env, "PGKICK_MIN_REMAINING_MS")),
            max_fanout=_setting(env, "PGKICK_MAX_FANOUT"),
            fanout_after=timedelta(milliseconds=_setting(env, "PGKICK_FANOUT_AFTER_MS")),
            backoff=timedelta(milliseconds=_setting(env, "PGKICK_BACKOFF_MS")),
            backoff_cap=timedelta(seconds=_setting(env, "PGKICK_BACKOFF_CAP_SECONDS")),
            retention=timedelta(days=_setting(env, "PGKICK_RETENTION_DAYS")),
            task_modules=tuple(
                m.strip()
                for m in (env.get("PGKICK_TASKS") or _text("PGKICK_TASKS")).split(",")
                if m.strip()
            ),
            local_concurrency=_setting(env, "PGKICK_LOCAL_CONCURRENCY"),
            connect_retries=_setting(env, "PGKICK_CONNECT_RETRIES"),
            worker_linger=timedelta(milliseconds=_setting(env, "PGKICK_WORKER_LINGER_MS")),
            watch_ttl=timedelta(seconds=_setting(env, "PGKICK_WATCH_SECONDS")),
            max_hops=_setting(env, "PGKICK_MAX_HOPS"),
            aws_timeout=_setting(env, "PGKICK_AWS_TIMEOUT_MS") / 1000,
            schema=schema_name(env),
        )


def _setting(env: Mapping[str, str], name: str) -> int:
    """The whole number `name` holds, with its default and bounds from VARIABLES."""
    variable = _VARIABLE[name]
    assert isinstance(variable.default, int) and variable.low is not None
    assert variable.high is not None  # every bounded variable has both bounds
    return _int(env, name, variable.default, variable.low, variable.high)


def _text(name: str) -> str:
    """The default of a text variable, from VARIABLES."""
    default = _VARIABLE[name].default
    assert isinstance(default, str)
    return default


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


def schema_name(env: Mapping[str, str] | None = None) -> str:
    """PGKICK_SCHEMA, the schema holding pgkick's tables: `pgkick` unless set."""
    env = os.environ if env is None else env
    return check_schema_name(env.get("PGKICK_SCHEMA") or _text("PGKICK_SCHEMA"), "PGKICK_SCHEMA")


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
    return _setting(env, "PGKICK_PRODUCER_LINGER_MS") / 1000


def failed_kick_wake(env: Mapping[str, str] | None = None) -> timedelta:
    """How long after a failed kick its wake-up is booked (the scheduler's minute)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_setting(env, "PGKICK_FAILED_KICK_WAKE_MS"))


def kick_pending(env: Mapping[str, str] | None = None) -> timedelta:
    """How long a kick sent counts as a worker on its way (pgkick.kick.watch)."""
    env = os.environ if env is None else env
    return timedelta(milliseconds=_setting(env, "PGKICK_KICK_PENDING_MS"))


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
