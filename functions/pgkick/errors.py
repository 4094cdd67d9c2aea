"""Every error pgkick raises on purpose, under one root: `except pgkick.PgkickError`.

Why one module: an app catches pgkick's failures without importing the modules
that raise them (the worker, the store, the schema), and each class says what
went wrong in terms an operator can act on. The classes that were ValueError or
RuntimeError before keep those bases, so existing `except ValueError` code still
catches them.
"""

from __future__ import annotations


class PgkickError(Exception):
    """The root of every error pgkick raises on purpose."""


class ConfigError(PgkickError, ValueError):
    """A setting is missing or malformed; raised before anything is written."""


class SchemaError(PgkickError, RuntimeError):
    """The database's schema is missing, behind, or ahead of this code."""


class DatabaseUnavailable(PgkickError, RuntimeError):
    """The database could not be reached (after the retries a cold start deserves)."""


class BadEvent(PgkickError, ValueError):
    """A Lambda event that is not a kick: answered as rejected, never retried."""


class UnknownTask(PgkickError, ValueError):
    """A task name this process's registry does not know (after `pgkick.load_tasks()`)."""


class PermanentError(PgkickError):
    """Raised by a task: fail the job now, do not retry it."""


# -- bad input, refused before anything is written ---------------------------------


class InvalidArgument(PgkickError, ValueError):
    """A value handed to pgkick is malformed or out of range; nothing was written."""


class InvalidArgumentType(PgkickError, TypeError):
    """A value handed to pgkick is of the wrong type; nothing was written."""


class UnknownParent(InvalidArgument):
    """`after=` names a job id that no job has in this enqueue's schema (never enqueued,
    purged, or a job of another PGKICK_SCHEMA); nothing was written."""


class InvalidWorkflow(InvalidArgument):
    """A `pgkick.Workflow` that cannot be enqueued as built (empty, a node of another
    workflow, a part linked to no other, a unique key on a node); nothing was written."""


class MisuseError(PgkickError, RuntimeError):
    """pgkick was called where it cannot act (outside the transaction it needs, on a
    connection in the wrong state); the message says what to do instead."""


class UsageError(PgkickError, RuntimeError):
    """A problem with what the operator asked for on the command line, said in one line."""


class Interrupted(PgkickError):
    """The operator stopped a command (Ctrl-C) part-way; the message says what it had
    committed before it stopped, and that a transaction under way was rolled back."""


class JobMissing(UsageError):
    """An operator (the CLI, the dashboard) named a job id that no job has; nothing changed."""


# -- the database and AWS ------------------------------------------------------------


class RoleRefused(PgkickError, PermissionError):
    """The connected role may not do this part of pgkick's work (the server's permission
    denied); the message names the pgkick roles that may (docs/deploy/roles.md)."""


class StatementError(PgkickError, RuntimeError):
    """A statement answered what it never answers (a row missing): a schema or role problem."""


class KickRefused(PgkickError, RuntimeError):
    """Lambda did not accept a kick (an answer other than 202); the job stays committed."""


class AwsUnavailable(PgkickError, RuntimeError):
    """An AWS call could not be made or was refused (no credentials, no region, an endpoint
    out of reach, a permission missing); the message says which and what to do."""


class AwsCallError(PgkickError, RuntimeError):
    """AWS refused a call the worker signed itself (pgkick.awsapi). `.response` has botocore's
    shape (Error.Code, Error.Message), so code that reads botocore's errors reads this."""

    def __init__(self, operation: str, code: str, message: str, status: int) -> None:
        super().__init__(f"{operation}: {code}: {message} (HTTP {status})")
        self.operation_name, self.code, self.status = operation, code, status
        self.response = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


class UniqueKeyChurn(PgkickError, RuntimeError):
    """The key's holder kept vanishing between insert and read-back (nothing written)."""


class NothingCommitted(PgkickError):
    """A group's transaction failed before its COMMIT and was rolled back: no job of it exists."""


# -- jobs, tasks and results ---------------------------------------------------------

MAX_SNOOZE_SECONDS = 30 * 24 * 3600  # a wake-up further out is more likely a unit mistake


class Snooze(PgkickError):
    """Raise from a task to put its job back in the queue for `seconds`, using no attempt.

    Why an exception: the task's code stops there, like a failure, but the worker
    re-queues the job at now + seconds (attempts given back) and books a wake-up.
    Bad seconds raise InvalidArgument (a ValueError) here, in the task, which the worker
    records as an ordinary failure naming the problem."""

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise InvalidArgumentType(
                f"Snooze: seconds must be a number, got {type(seconds).__name__}"
            )
        if not 0 < seconds <= MAX_SNOOZE_SECONDS:  # NaN fails this too
            raise InvalidArgument(
                f"Snooze: seconds must be above 0 and at most {MAX_SNOOZE_SECONDS}, got {seconds}"
            )
        super().__init__(f"snoozed for {seconds} s")
        self.seconds = float(seconds)


class BatchResultError(PgkickError, TypeError):
    """A batch task returned something other than None or a mapping of its own items' job
    ids to outcomes: its whole batch fails (pgkick.tasks.batch says why)."""


class JobFailed(PgkickError, RuntimeError):
    """The job ended failed: `error` is its last error (e.g. 'cancelled by operator')."""

    def __init__(self, job_id: int, error: str | None) -> None:
        super().__init__(f"job {job_id} failed: {error}")
        self.job_id = job_id
        self.error = error


class JobRetried(JobFailed):
    """A run of the job failed and a retry is booked (`pgkick enqueue` waiting for its job
    says so at once, rather than waiting out the retries' backoff)."""

    def __init__(self, job_id: int, error: str | None, attempt: int, of: int, at: str) -> None:
        PgkickError.__init__(
            self, f"job {job_id} failed attempt {attempt} of {of}, retried at {at}: {error}"
        )
        self.job_id = job_id
        self.error = error


class JobNotFound(PgkickError, LookupError):
    """No job has that id (never enqueued, or purged after its retention)."""


class JobNotFinished(PgkickError, RuntimeError):
    """The job is still queued or running: no result yet."""

    def __init__(self, job_id: int, status: str) -> None:
        super().__init__(f"job {job_id} is {status}: no result yet")
        self.job_id = job_id
        self.status = status


# -- durable steps (job.step, job.sleep: pgkick.tasks.steps) ---------------------------


class StepInputError(PermanentError, InvalidArgument):
    """A step called in a way no retry can fix (a name reused with other arguments, a result
    or an argument that is not JSON); raised in the task before anything is written, and
    the job fails for good with it (a retry would run the same code into the same error)."""


class StepRefused(PgkickError, RuntimeError):
    """A step's result was not stored: this attempt no longer holds the job (its lease was
    taken over). The task stops there; the worker writes nothing more for the job."""


class Continuation(PgkickError):
    """Raised by `job.step` when the invocation's time left is too short for the next step:
    the worker puts the job back in the queue (no attempt used) and hands the queue to a
    fresh invocation, which replays the finished steps from storage. Let it propagate."""

    def __init__(self, *, stalled: bool, left_ms: int | None = None) -> None:
        super().__init__("continued in a fresh invocation")
        self.stalled = stalled  # no step ran in this invocation before it
        self.left_ms = left_ms  # the invocation's time left then, less the worker's reserve
