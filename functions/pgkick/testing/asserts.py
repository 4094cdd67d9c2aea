"""Assertions on the jobs a test enqueued, in the style of River's rivertest.

Why assertions of pgkick's own rather than a test comparing lists: a failing
`assert jobs.enqueued(...) == [...]` shows two lists, while the question is
"was this job enqueued?". `assert_enqueued(task, payload=..., queue=...)` answers
it with the job itself, or fails in one message listing what the test enqueued
instead; `assert_not_enqueued` names the job that should not be there. Both read
jobs in any status (a job that ran inline was still enqueued), and only the jobs
of the current block (pgkick.testing.modes). A task is named by its string or by
its typed handle; a dataclass or pydantic payload is compared as the JSON the
row holds, as the producer turned it into.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgkick.errors import InvalidArgumentType
from pgkick.tasks.handle import Task, to_json_value

SHOWN = 10  # jobs listed in a failure message; the rest are counted


class _Any:
    """Matches every payload: the default of the assertions' `payload=`."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()
"""Matches every payload: `assert_enqueued(task, payload=ANY)` (the default) asserts only
that a job of the task was enqueued, whatever its payload."""


def task_name(task: object) -> str | None:
    """A task's name from its string or its handle (None: any task)."""
    if task is None or isinstance(task, str):
        return task
    if isinstance(task, Task):
        return task.name
    raise InvalidArgumentType(f"task: a name or a @pgkick.task handle, got {type(task).__name__}")


def _matches(job: dict[str, Any], name: str, payload: Any, queue: str | None) -> bool:
    return (
        job["task"] == name
        and (queue is None or job["queue"] == queue)
        and (payload is ANY or job["payload"] == to_json_value(payload))
    )


def _wanted(name: str, payload: Any, queue: str | None) -> str:
    parts = [f"task {name!r}"]
    if queue is not None:
        parts.append(f"queue {queue!r}")
    if payload is not ANY:
        parts.append(f"payload {to_json_value(payload)!r}")
    return ", ".join(parts)


def _listing(jobs: Sequence[dict[str, Any]]) -> str:
    if not jobs:
        return "this test enqueued no job"
    shown = [
        f"#{job['id']} {job['task']!r} in {job['queue']!r} ({job['status']}): {job['payload']!r}"
        for job in jobs[:SHOWN]
    ]
    more = f"; and {len(jobs) - SHOWN} more" if len(jobs) > SHOWN else ""
    return "this test enqueued " + "; ".join(shown) + more


def require(
    jobs: Sequence[dict[str, Any]], task: object, payload: Any, queue: str | None
) -> dict[str, Any]:
    """The first job matching; AssertionError listing the test's jobs when none does."""
    name = task_name(task)
    if name is None:
        raise InvalidArgumentType("assert_enqueued: name the task")
    for job in jobs:
        if _matches(job, name, payload, queue):
            return job
    raise AssertionError(f"no job with {_wanted(name, payload, queue)}; {_listing(jobs)}")


def refuse(jobs: Sequence[dict[str, Any]], task: object, payload: Any, queue: str | None) -> None:
    """AssertionError naming the first matching job, if any."""
    name = task_name(task)
    if name is None:
        raise InvalidArgumentType("assert_not_enqueued: name the task")
    found = [job for job in jobs if _matches(job, name, payload, queue)]
    if found:
        raise AssertionError(
            f"expected no job with {_wanted(name, payload, queue)}; {_listing(found)}"
        )
