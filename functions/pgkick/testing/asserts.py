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

Why ANY stands for one value wherever it is (the whole payload, a key's value, an item
of a list), as unittest.mock.ANY does, and not for "any other keys": a payload holding a
timestamp or a generated id is asserted on by what the test knows, while a key the test
forgot, or one the code added, still fails the match, so the payload's shape is checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgkick.errors import InvalidArgumentType
from pgkick.tasks.handle import Task, to_json_value

SHOWN = 10  # jobs listed in a failure message; the rest are counted


class _Any:
    """Matches any value: the default of the assertions' `payload=`, or one value inside it."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()
"""Matches any value: `assert_enqueued(task, payload=ANY)` (the default) asserts only that a
job of the task was enqueued, whatever its payload; `payload={"order": 42, "at": ANY}`, one
whose payload has exactly these keys, "order" 42 and "at" anything (in a list: any item)."""


def _same(wanted: Any, held: Any) -> bool:
    """`held` (the row's JSON) is `wanted` (the test's, as JSON), ANY matching any value."""
    if wanted is ANY:
        return True
    if isinstance(wanted, dict):
        return (
            isinstance(held, dict)
            and wanted.keys() == held.keys()
            and all(_same(value, held[key]) for key, value in wanted.items())
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(held, list)
            and len(wanted) == len(held)
            and all(_same(w, h) for w, h in zip(wanted, held, strict=True))
        )
    return bool(wanted == held)


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
        and _same(to_json_value(payload), job["payload"])
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
