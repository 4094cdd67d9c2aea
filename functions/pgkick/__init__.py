"""pgkick: a Postgres job queue for serverless workers.

Commit a job in Postgres, kick a short-lived worker, let the database sleep.
"""

from pgkick.producer import enqueue_and_kick, enqueue_many, transaction
from pgkick.recurring import periodic
from pgkick.results import JobFailed, JobNotFinished, result, wait
from pgkick.tasks import JobContext, PermanentError, Snooze, task

__all__ = [
    "JobContext",
    "JobFailed",
    "JobNotFinished",
    "PermanentError",
    "Snooze",
    "enqueue_and_kick",
    "enqueue_many",
    "periodic",
    "result",
    "task",
    "transaction",
    "wait",
]
