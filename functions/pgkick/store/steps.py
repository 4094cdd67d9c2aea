"""A job's durable steps in the database: read them back, store one (fenced), continue.

Why a store of its own (mixed into WorkerStore): the steps are written from inside a
task's run (pgkick.tasks.steps), each one a short autocommit statement on the worker's
connection, never a transaction held while the task's code runs; and each write is
fenced by the attempt like every outcome the worker records: a worker whose lease was
taken over stores nothing.
"""

from typing import Any, NamedTuple

from pgkick.connections.db import Database
from pgkick.store import queries


class StoredStep(NamedTuple):
    """A finished step as stored: its arguments' hash, its result (decoded JSON), how long
    it took, and for a sleep the seconds still to wait (0 once over; None for a step)."""

    args_hash: str
    result: Any
    duration_ms: int
    sleep_left: float | None


class StoredSteps(NamedTuple):
    """What a job's steps replay from; `stalled`: its last continuation ran no step first,
    with `stalled_left_ms` left in its invocation (less the reserve; None: not recorded)."""

    steps: dict[str, StoredStep]
    stalled: bool
    stalled_left_ms: int | None = None


class StepStore(Database):
    """The statements of durable steps."""

    def steps_of(self, job_id: int) -> StoredSteps:
        rows = self.rows(queries.JOB_STEP_LIST, id=job_id)
        steps = {
            name: StoredStep(args_hash, result, duration_ms, sleep_left)
            for _stalled, _left, name, args_hash, result, duration_ms, sleep_left in rows
            if name is not None
        }
        stalled = bool(rows and rows[0][0])
        return StoredSteps(steps, stalled, rows[0][1] if stalled else None)

    def record_step(
        self,
        job_id: int,
        attempts: int,
        name: str,
        *,
        args_hash: str,
        result: str | None,
        duration_ms: int,
        sleep: float | None = None,
    ) -> tuple[bool, Any]:
        """Store a finished step (`result`: JSON text or None), or a sleep's end (now +
        `sleep` seconds): (True, the result as stored, in jsonb's form) if this attempt
        still held the job and it is written, else (False, None)."""
        rows = self.rows(
            queries.JOB_STEP_RECORD,
            id=job_id,
            attempts=attempts,
            name=name,
            args_hash=args_hash,
            result=result,
            duration_ms=duration_ms,
            sleep=sleep,
        )
        return (True, rows[0][0]) if rows else (False, None)

    def clear_stall(self, job_id: int, attempts: int) -> None:
        """The stall mark's one step is stored: later runs' steps are estimated again."""
        self.count(queries.JOB_STEP_STALL_CLEAR, id=job_id, attempts=attempts)

    def continue_job(
        self, job_id: int, attempts: int, *, stalled: bool, left_ms: int | None = None
    ) -> str | None:
        """Back to the queue, due now, the attempt given back (a continuation), with the time
        left when it `stalled` (the stall guard's measure); returns the status written
        ('queued', or 'failed' for a cancel requested meanwhile), or None when this attempt
        no longer held the job (nothing written)."""
        rows = self.rows(
            queries.JOB_CONTINUE, id=job_id, attempts=attempts, stalled=stalled, left_ms=left_ms
        )
        return str(rows[0][0]) if rows else None
