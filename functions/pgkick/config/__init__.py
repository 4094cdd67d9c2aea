"""Configuration from the environment, the same for an app, a Lambda and the CLI.

Why environment variables: Lambda configures functions that way (template.yaml
sets them), and an app or a shell can do the same without code. The database
DSN comes from DATABASE_URL or, in Lambda, from a Secrets Manager secret read by
pgkick.awsapi.secrets (cached across invocations, never logged).

Why one object read once: `Settings` (the worker's, built once per execution
environment by pgkick.worker.runtime and passed down) and `AppSettings` (the app
side's: the database, the schema, the producer's linger and kick timings, read once
per process environment by `app_settings()`) are the only readers of the environment;
nothing below them reads a variable. `overriding()` changes them for a block (the
CLI's --schema, the test kit's database) without writing os.environ. Defaults and
bounds come from `pgkick.variables.VARIABLES`, the table the docs are rendered from.

Why a package: `readers` parses one variable at a time (the schema's and the tasks'
names checked, the kick timings, the secret's text), `app` holds the app side's cached
settings, `overriding()` and the DSN; the worker's `Settings` stays here, in the face,
since the worker's cold start needs it (and both others) anyway: the worker loads the
same code as before the split, in three modules. Every caller imports `pgkick.config`.
"""

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import NamedTuple

from pgkick import variables as _variables
from pgkick.config.app import (
    AppSettings,
    app_settings,
    database_url,
    overriding,
    rotated_secret_dsn,
    schema_overridden,
)
from pgkick.config.readers import (
    check_schema_name,
    dsn_from_secret,
    failed_kick_wake,
    kick_pending,
    kick_safety,
    on_demand_init,
    producer_linger,
    schema_name,
    task_modules,
    test_database_setting,
    test_database_url,
    xray_trace_header,
)
from pgkick.errors import ConfigError

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_MAX_FANOUT",
    "DEFAULT_MAX_HOPS",
    "DEFAULT_MIN_REMAINING_MS",
    "DEFAULT_SCHEMA",
    "DEFAULT_WATCH_SECONDS",
    "KICKERS",
    "UNSET",
    "VARIABLES",
    "AppSettings",
    "ConfigError",
    "Settings",
    "Variable",
    "app_settings",
    "check_schema_name",
    "database_url",
    "dsn_from_secret",
    "failed_kick_wake",
    "kick_pending",
    "kick_safety",
    "on_demand_init",
    "overriding",
    "producer_linger",
    "rotated_secret_dsn",
    "schema_name",
    "task_modules",
    "test_database_setting",
    "test_database_url",
    "xray_trace_header",
]

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


class Settings(NamedTuple):
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
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """The worker's settings from `env` (default: the process's environment, where a
        schema `overriding()` names, the CLI's --schema, wins over PGKICK_SCHEMA, which is
        then not read: a bad one refused `pgkick reap --schema pgkick`)."""
        flagged = schema_overridden() if env is None else None
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
            schema=flagged or schema_name(env),
            schedule_dlq_arn=env.get("PGKICK_SCHEDULE_DLQ_ARN") or None,
        )
