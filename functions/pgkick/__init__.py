"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
"""

from pgkick.producer import enqueue_and_kick, enqueue_many, transaction
from pgkick.tasks import JobContext, PermanentError, task

__all__ = [
    "JobContext",
    "PermanentError",
    "enqueue_and_kick",
    "enqueue_many",
    "task",
    "transaction",
]
