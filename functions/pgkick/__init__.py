"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
Importing pgkick loads the producer only: the worker loop, leases and reaper
load with the Lambda handlers (pgkick.aws), the tooling never (pgkick-dev).
"""

from pgkick.connections.db import Connection
from pgkick.errors import (
    BadEvent,
    ConfigError,
    DatabaseUnavailable,
    PermanentError,
    PgkickError,
    SchemaError,
)
from pgkick.producer.enqueue import enqueue_and_kick, enqueue_many, transaction
from pgkick.producer.joined import PendingJobs, enqueue_in
from pgkick.tasks.handle import Task
from pgkick.tasks.recurring import periodic
from pgkick.tasks.registry import JobContext, Snooze, task
from pgkick.tasks.results import JobFailed, JobNotFinished, result, wait

__all__ = [
    "BadEvent",
    "ConfigError",
    "Connection",
    "DatabaseUnavailable",
    "JobContext",
    "JobFailed",
    "JobNotFinished",
    "PendingJobs",
    "PermanentError",
    "PgkickError",
    "SchemaError",
    "Snooze",
    "Task",
    "enqueue_and_kick",
    "enqueue_in",
    "enqueue_many",
    "periodic",
    "result",
    "task",
    "transaction",
    "wait",
]
