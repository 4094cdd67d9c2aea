"""`after=`: the jobs a job waits for (issue 34, docs/guide/dependencies.md), checked
before anything connects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgkick.errors import InvalidArgument, InvalidArgumentType

# What a dependant does when a parent fails or is cancelled (issue 34): fail with the
# parent's reason, end cancelled, or count the parent as finished and run anyway.
DEPENDENCY_POLICIES = ("fail", "cancel", "run anyway")
MAX_PARENTS = 100_000
MAX_JOB_ID = 2**63 - 1  # jobs.id is a bigint


def check_after(after: object) -> tuple[tuple[int, str], ...]:
    """`after=`: job ids (policy 'fail'), (id, policy) pairs, or a mapping id -> policy.

    Why here, before anything connects: a wrong policy name or a parent given twice with
    two policies is a typo that would otherwise surface as a job that never runs. Whether
    the parents exist is the database's to say (pgkick.store.dependencies), in the
    enqueue's own transaction, before the job's row is written."""
    if after is None:
        return ()
    if isinstance(after, (str, bytes)) or not isinstance(after, (Sequence, Mapping)):
        raise InvalidArgumentType(
            f"after: must be a list of job ids or (id, policy) pairs, got {type(after).__name__}"
        )
    items = list(after.items()) if isinstance(after, Mapping) else list(after)
    if len(items) > MAX_PARENTS:
        raise InvalidArgument(f"after: {len(items)} parents, at most {MAX_PARENTS} allowed")
    chosen: dict[int, str] = {}
    for item in items:
        parent, policy = (item, "fail") if not isinstance(item, (tuple, list)) else _pair(item)
        if type(parent) is not int:
            raise InvalidArgumentType(
                f"after: a parent must be a job id (int), got {type(parent).__name__}"
            )
        if not 1 <= parent <= MAX_JOB_ID:  # past bigint: the server's bare range error
            raise InvalidArgument(f"after: job ids are 1 to {MAX_JOB_ID}, got {parent}")
        if policy not in DEPENDENCY_POLICIES:
            raise InvalidArgument(
                f"after: unknown policy {policy!r} for job {parent}; use one of "
                f"{', '.join(repr(p) for p in DEPENDENCY_POLICIES)}"
            )
        if chosen.setdefault(parent, policy) != policy:
            raise InvalidArgument(
                f"after: job {parent} is given twice, with policies {chosen[parent]!r} and "
                f"{policy!r}; give it once"
            )
    return tuple(chosen.items())


def _pair(item: tuple[Any, ...] | list[Any]) -> tuple[object, object]:
    if len(item) != 2:
        raise InvalidArgumentType(f"after: a pair is (job id, policy), got {item!r}")
    return item[0], item[1]
