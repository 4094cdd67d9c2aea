"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
Importing pgkick loads the producer only: the worker loop, leases and reaper
load with the Lambda handlers (pgkick.aws), the tooling never (pgkick-dev).
"""

from pgkick.errors import (
    BadEvent,
    ConfigError,
    DatabaseUnavailable,
    PermanentError,
    PgkickError,
    SchemaError,
)
from pgkick.producer import enqueue_and_kick, enqueue_many, transaction
from pgkick.recurring import periodic
from pgkick.results import JobFailed, JobNotFinished, result, wait
from pgkick.tasks import JobContext, Snooze, task

__all__ = [
    "BadEvent",
    "ConfigError",
    "DatabaseUnavailable",
    "JobContext",
    "JobFailed",
    "JobNotFinished",
    "PermanentError",
    "PgkickError",
    "SchemaError",
    "Snooze",
    "enqueue_and_kick",
    "enqueue_many",
    "periodic",
    "result",
    "task",
    "transaction",
    "wait",
]
