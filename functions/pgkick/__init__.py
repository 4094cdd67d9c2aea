"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
"""

from pgkick.handle import Task
from pgkick.joined import PendingJobs, enqueue_in
from pgkick.producer import enqueue_and_kick, enqueue_many, transaction
from pgkick.store import Connection
from pgkick.tasks import JobContext, PermanentError, task

__all__ = [
    "Connection",
    "JobContext",
    "PendingJobs",
    "PermanentError",
    "Task",
    "enqueue_and_kick",
    "enqueue_in",
    "enqueue_many",
    "task",
    "transaction",
]
