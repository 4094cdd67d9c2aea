"""One variable at a time: each read from a mapping (os.environ unless given), parsed and
checked, with a ConfigError naming the variable when its value cannot be used.

Why apart from the settings objects: both `Settings` (the worker's, in `pgkick.config`) and
`AppSettings` (the app side's, `pgkick.config.app`) are built from these, and a few callers
read one of them alone (the worker's kick timings, the X-Ray header at each job, the test
kit's server). A name spliced into statements (the schema) or imported (PGKICK_TASKS) is
checked here once, whichever object reads it. Defaults and bounds come from
`pgkick.variables.VARIABLES`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from urllib.parse import quote

from pgkick import variables as _variables
from pgkick.errors import ConfigError

# Lowercase, as PostgreSQL folds unquoted names: the schema reads the same in psql.
# Matched whole (fullmatch): `$` would let a final newline into the statements.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
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
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
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


def on_demand_init(env: Mapping[str, str] | None = None) -> bool:
    """This process is a Lambda environment initialised for the invocation that follows it:
    AWS_LAMBDA_INITIALIZATION_TYPE, set by Lambda, is `on-demand` (not
    `provisioned-concurrency` or `snap-start`, which initialise long before any invocation).
    The worker's cold start then connects ahead (pgkick.connections.early)."""
    env = os.environ if env is None else env
    return env.get("AWS_LAMBDA_INITIALIZATION_TYPE") == "on-demand"


def test_database_url() -> str | None:
    """The server pgkick's pytest plugin creates its test databases on:
    PGKICK_TEST_DATABASE_URL, else DATABASE_URL, else None (the embedded PostgreSQL)."""
    return os.environ.get("PGKICK_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL") or None


def test_database_setting() -> str | None:
    """The setting test_database_url() took its server from (for an error to name), or None."""
    for setting in ("PGKICK_TEST_DATABASE_URL", "DATABASE_URL"):
        if os.environ.get(setting):
            return setting
    return None


def dsn_from_secret(text: str) -> str:
    """Accept a plain DSN, {"url": ...}, or the RDS secret shape (username, password, host...).

    Whitespace around the text is not the DSN's: a secret stored from a file
    (`--secret-string file://dsn.txt`) keeps the file's last newline, which libpq read as
    the end of the database's name ('database "app\n" does not exist')."""
    text = text.strip()
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
