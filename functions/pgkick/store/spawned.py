"""The children a running task spawns (issue 34): ids reserved while it runs, rows written
in the transaction that completes it.

Why reserve ids first: a task names its children at once (a join spawned after them
waits for them, `after=`), yet their rows must not exist before the spawning job is done,
or a crash between the two would leave half a fan-out. A sequence hands out ids outside
any transaction (job_id_reserve: one statement for any number), so the task gets its
children's ids while nothing is written; the worker later inserts the rows with those
very ids (job_insert_many_reserved) in the transaction of the job's completion. An id
reserved by a run that then failed is a gap in the sequence, nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgkick.connections.db import Database
from pgkick.store import queries
from pgkick.store.bulk import arrays
from pgkick.store.producer import QueuedJob
from pgkick.validation import JobSpec


def reserve_ids(db: Database, n: int) -> list[int]:
    """`n` fresh job ids, ascending (one statement; in autocommit, nothing to roll back)."""
    if n <= 0:
        return []
    return [row[0] for row in db.rows(queries.JOB_ID_RESERVE, n=n)]


def insert_reserved(db: Database, ids: Sequence[int], specs: Sequence[JobSpec]) -> list[QueuedJob]:
    """Insert `specs` as queued jobs with the reserved `ids` (one statement; in the caller's
    transaction), in input order. The specs share one trace context: one spawn call's."""
    params = {"ids": list(ids), **arrays(list(enumerate(specs)))}
    return [QueuedJob._make(row) for row in db.rows(queries.JOB_INSERT_MANY_RESERVED, **params)]
