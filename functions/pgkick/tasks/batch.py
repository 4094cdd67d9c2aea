"""Batch tasks: one call of the task's code for many jobs, with an outcome per job.

Why: on Lambda a batch spreads one invocation, one connection and one round trip to
a downstream API (a bulk insert, an embeddings call, a multi-send) over many jobs.
Why per-job outcomes, as SQS's `batchItemFailures`: one bad item must not retry its
batch-mates (they would run twice) nor be hidden by them. Every job keeps its own
row, attempt, lease, backoff and result; the batch is only how the code is called.

The contract, checked here so the worker maps it to per-job writes:

- the function takes `items: list[BatchItem[P]]` (in claim order, at most `batch`);
- it returns None (every item done, no result), or a mapping from an item's job id
  to that job's outcome: a value is its result (stored as a plain task's is), an
  Exception instance is its failure (`PermanentError` fails it for good, `Snooze`
  puts it back without using an attempt, anything else is retried with backoff
  until max_attempts). An item the mapping leaves out is done, with no result;
- raising fails the whole batch, each job by its own attempts (as SQS retries a
  batch whose function raised); a mapping naming an id not in the batch fails the
  whole batch too (`BatchResultError`): the code mixed batches up, and guessing
  which outcomes are real would store the wrong ones.

Why batch_window only groups jobs already claimed (pgkick.worker.batch_run): a
serverless worker must not sleep on an empty queue holding a connection, so a
window is never a wait. It is how long a group short of `batch` may be held
while the worker claims again at once, and only after a full claim (more jobs
are ready): a short or empty claim runs the group immediately.
"""

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from pgkick import variables
from pgkick.errors import BatchResultError, InvalidArgument, InvalidArgumentType
from pgkick.tasks.payloads import payload_loader

MAX_BATCH = variables.BY_NAME["PGKICK_BATCH"].high or 1000  # no claim ever brings more
MAX_BATCH_WINDOW = timedelta(minutes=5)  # held jobs keep their leases; longer is a mistake


@dataclass(frozen=True, slots=True)
class BatchItem[P]:
    """One job of a batch: its id (the key of the outcome mapping), its payload (of the
    type the function declares, as a plain task's) and which attempt this is."""

    id: int
    payload: P
    attempt: int
    max_attempts: int
    queue: str

    @property
    def idempotency_key(self) -> str:
        return f"pgkick-{self.id}"


class BatchSpec(NamedTuple):
    """A batch task as the worker needs it: its function, group size and window."""

    fn: Callable[[list[BatchItem[Any]]], Any]
    size: int
    window: timedelta
    load: Callable[[Any], Any] | None  # the declared payload type rebuilt from JSON

    def item(self, job_id: int, payload: Any, attempt: int, max_attempts: int, queue: str) -> Any:
        """The BatchItem of one job; raises what the payload type's loader raises."""
        value = payload if self.load is None else self.load(payload)
        return BatchItem(job_id, value, attempt, max_attempts, queue)


def batch_spec(name: str, fn: Callable[..., Any], batch: object, batch_window: object) -> BatchSpec:
    """The checked declaration: `batch` a whole number 1..1,000, `batch_window` 0..5 min
    (seconds or a timedelta). Raises before anything is registered.

    Not checked against the worker's claim batch (PGKICK_BATCH): the task module is
    imported by producers too, whose environment has no say in how a worker claims. A
    batch larger than one claim is filled across claims under a `batch_window`; without
    one a call gets at most what a claim brought (docs/guide/batch.md)."""
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise InvalidArgumentType(
            f"task {name!r}: batch must be a whole number of jobs, got {type(batch).__name__}"
        )
    if not 1 <= batch <= MAX_BATCH:
        raise InvalidArgument(
            f"task {name!r}: batch={batch} is out of range: a batch holds 1 to {MAX_BATCH} jobs"
        )
    window = _window(name, batch_window)
    if len(inspect_parameters(fn)) != 1:
        raise InvalidArgumentType(
            f"task {name!r}: a batch task takes one parameter, `items: list[BatchItem[P]]`"
        )
    return BatchSpec(fn, batch, window, batch_payload_loader(fn, name))


def _window(name: str, value: object) -> timedelta:
    if value is None:
        return timedelta(0)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidArgumentType(
            f"task {name!r}: batch_window must be seconds or a timedelta, "
            f"got {type(value).__name__}"
        )
    if not 0 <= seconds <= MAX_BATCH_WINDOW.total_seconds():  # NaN fails this too
        raise InvalidArgument(
            f"task {name!r}: batch_window={value!r} is out of range: 0 to "
            f"{int(MAX_BATCH_WINDOW.total_seconds())} s (it never makes a worker wait: "
            f"it bounds how long a short batch is held while full claims keep coming)"
        )
    return timedelta(seconds=seconds)


def inspect_parameters(fn: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(fn).parameters)


def batch_payload_loader(fn: Callable[..., Any], name: str = "") -> Callable[[Any], Any] | None:
    """How to rebuild `P` of `items: list[BatchItem[P]]` (a dataclass or a pydantic model);
    None for a plain type (dict, TypedDict, Any), as a plain task's payload_loader."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # a forward reference that cannot be resolved: no conversion
        return None
    declared = hints.get(inspect_parameters(fn)[0])
    item = _only_argument(declared)  # list[X] -> X
    if typing.get_origin(item) is not BatchItem:
        return None
    payload = _only_argument(item)  # BatchItem[P] -> P
    if payload is None:
        return None

    def shaped(value: Any) -> None:  # a stand-in whose first parameter has the type P
        del value

    shaped.__annotations__ = {"value": payload}
    return payload_loader(shaped, name)


def _only_argument(generic: object) -> Any:
    args = typing.get_args(generic)
    return args[0] if len(args) == 1 else None


def settle(items: Sequence[BatchItem[Any]], returned: object) -> dict[int, object]:
    """Each item's outcome from what the function returned: its result, or an Exception.
    Raises BatchResultError when the value breaks the contract (see the module's doc)."""
    if returned is None:
        return dict.fromkeys((item.id for item in items), None)
    if not isinstance(returned, Mapping):
        raise BatchResultError(
            f"a batch task returns None or a mapping of job id to result or exception, "
            f"got {type(returned).__name__}"
        )
    ids = {item.id for item in items}
    strangers = [key for key in returned if key not in ids]
    if strangers:
        raise BatchResultError(
            f"the batch task's outcomes name jobs not in its batch: {strangers[:5]!r} "
            f"(keys are BatchItem.id of the items it was given)"
        )
    return {item.id: returned.get(item.id) for item in items}


def single_call(spec: BatchSpec) -> Callable[[Any, Any], Any]:
    """The batch task as a plain task (payload, context): a batch of one. Why: whoever
    runs one job by name (a job met before the registry knew the task was a batch one,
    pgkick.testing's modes) gets the same code and the same outcome mapping."""

    def call(payload: Any, job: Any) -> Any:
        items = [spec.item(job.id, payload, job.attempt, job.max_attempts, job.queue)]
        outcome = settle(items, spec.fn(list(items)))[job.id]  # its own list (batch_run)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return call
