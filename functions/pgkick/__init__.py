"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
Importing pgkick loads nothing more: each name below loads its part on first use (the
producer for `enqueue_and_kick`), the worker loop, leases and reaper load with the Lambda
handlers (pgkick.aws), the tooling never (pgkick-dev).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# A lazy face (PEP 562): each name is imported on first use, so a module that imports
# pgkick's parts directly (the worker Lambda: `pgkick.aws.worker`) does not pay at its cold
# start for the ones it never uses (asyncio, workflows, joined enqueues); `from pgkick
# import task` loads the task registry only. The imports below are for type checkers and
# IDEs; at run time _FACE says where each name lives.
if TYPE_CHECKING:
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
        RoleRefused,
        SchemaError,
        Snooze,
        UnknownTask,
    )
    from pgkick.producer.enqueue import enqueue_and_kick, enqueue_many, transaction
    from pgkick.producer.joined import PendingJobs, enqueue_in
    from pgkick.tasks.aio_results import wait_async
    from pgkick.tasks.batch import BatchItem
    from pgkick.tasks.context import JobContext
    from pgkick.tasks.handle import Task
    from pgkick.tasks.recurring import periodic
    from pgkick.tasks.registry import load_tasks, task
    from pgkick.tasks.results import result, wait
    from pgkick.tasks.workflow import Workflow, WorkflowRun

_FACE = {
    "Connection": "pgkick.connections.db",
    **dict.fromkeys(
        [
            "BadEvent",
            "ConfigError",
            "DatabaseUnavailable",
            "JobFailed",
            "JobNotFinished",
            "JobNotFound",
            "PermanentError",
            "PgkickError",
            "RoleRefused",
            "SchemaError",
            "Snooze",
            "UnknownTask",
        ],
        "pgkick.errors",
    ),
    **dict.fromkeys(["enqueue_and_kick", "enqueue_many", "transaction"], "pgkick.producer.enqueue"),
    **dict.fromkeys(["PendingJobs", "enqueue_in"], "pgkick.producer.joined"),
    "BatchItem": "pgkick.tasks.batch",
    "Task": "pgkick.tasks.handle",
    "periodic": "pgkick.tasks.recurring",
    "JobContext": "pgkick.tasks.context",
    **dict.fromkeys(["load_tasks", "task"], "pgkick.tasks.registry"),
    **dict.fromkeys(["result", "wait"], "pgkick.tasks.results"),
    "wait_async": "pgkick.tasks.aio_results",
    **dict.fromkeys(["Workflow", "WorkflowRun"], "pgkick.tasks.workflow"),
}


if not TYPE_CHECKING:  # a type checker sees the imports above: a misspelt name stays an error

    def __getattr__(name: str) -> Any:
        """`pgkick.<name>`: imported from where it lives on first use, then kept here."""
        where = _FACE.get(name)
        if where is None:
            raise AttributeError(f"module 'pgkick' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(where), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*globals(), *_FACE])


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
    "RoleRefused",
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
    "wait_async",
]
