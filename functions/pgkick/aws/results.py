"""What the handlers answer: typed, and plain JSON (Lambda's marshaller knows no datetime)."""

from typing import Any, TypedDict


class WorkerResult(TypedDict):
    """One invocation's drain (pgkick.worker.loop.Summary as Lambda returns it)."""

    queue: str
    claimed: int
    done: int
    failed: int
    retried: int
    lost: int
    rescued: int
    wake_failures: int
    batches: int
    rekicked: bool
    fanouts: int
    stopped_because: str
    duration_ms: int


class TickResult(WorkerResult):
    """A periodic schedule's tick: its job (the one a tick inserts, or the earlier one if the
    scheduler delivered the tick twice), then the drain of its queue."""

    periodic: str
    tick: str
    job: int


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class BatchResult(TypedDict):
    """An SQS batch (FailedKicksQueue): the records to hand back, Lambda's partial-batch
    answer (ReportBatchItemFailures); every other record is deleted from the queue."""

    batchItemFailures: list[BatchItemFailure]


class Rejected(TypedDict):
    """An event that is not a kick: answered, not raised (a retry would fail the same way)."""

    rejected: str


class ReaperResult(TypedDict):
    """One reaper run (pgkick.worker.reaper.reap's report)."""

    requeued: int
    failed: int
    ready: list[str]
    kicked: list[str]
    kick_failures: list[str]
    purged: int
    purge_complete: bool  # False: stopped for time, older finished jobs left for the next run
    purged_ticks: int
    purged_starts: int
    queues: list[dict[str, Any]]
    table: dict[str, Any]
