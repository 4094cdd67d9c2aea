"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
Importing pgkick loads the producer only: the worker loop, leases and reaper
load with the Lambda handlers (pgkick.aws), the tooling never (pgkick-dev).
"""

from __future__ import annotations

from pgkick.connections.db import Connection
from pgkick.errors import (
    BadEvent,
    ConfigError,
    DatabaseUnavailable,
    JobFailed,
    JobNotFinished,
    JobNotFound,
    PermanentError,
    PgkickError,
    SchemaError,
    Snooze,
    UnknownTask,
)
from pgkick.producer.enqueue import enqueue_and_kick, enqueue_many, transaction
from pgkick.producer.joined import PendingJobs, enqueue_in
from pgkick.tasks.batch import BatchItem
from pgkick.tasks.handle import Task
from pgkick.tasks.recurring import periodic
from pgkick.tasks.registry import JobContext, load_tasks, task
from pgkick.tasks.results import result, wait
from pgkick.tasks.workflow import Workflow, WorkflowRun


def migrate(dsn: str | None = None, *, schema: str | None = None) -> list[int]:
    """Apply pgkick's schema migrations to `dsn` (default $DATABASE_URL), as `pgkick migrate`
    does: idempotent, safe when several run at once. Returns the versions it applied.

    Why here: an app's own set-up (a test fixture, a release step in Python) should not have
    to shell out to the CLI or import pgkick's store to get the schema every call needs."""
    from pgkick import config
    from pgkick.store import migrations

    target = dsn or config.app_settings().dsn()
    with migrations.MigrationStore.open(
        target, schema=schema, application_name="pgkick-migrate"
    ) as store:
        return migrations.migrate(store).applied


__all__ = [
    "BadEvent",
    "BatchItem",
    "ConfigError",
    "Connection",
    "DatabaseUnavailable",
    "JobContext",
    "JobFailed",
    "JobNotFinished",
    "JobNotFound",
    "PendingJobs",
    "PermanentError",
    "PgkickError",
    "SchemaError",
    "Snooze",
    "Task",
    "UnknownTask",
    "Workflow",
    "WorkflowRun",
    "enqueue_and_kick",
    "enqueue_in",
    "enqueue_many",
    "load_tasks",
    "migrate",
    "periodic",
    "result",
    "task",
    "transaction",
    "wait",
]
