"""A workflow seen as one unit (pgkick.Workflow, `pgkick workflow ID`): its jobs, their
states and its critical path, read-only.

Why no workflow table: a workflow's jobs are already tied together by job_dependencies
and by the transaction that wrote them all (one created_at); sql/job_workflow_list.sql
walks those links from any of its jobs. Why the critical path here, beside the read: the
CLI and the dashboard show the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgkick.connections.db import Database
from pgkick.store import queries

FINISHED = ("done", "failed")


@dataclass(frozen=True, slots=True)
class WorkflowJob:
    id: int
    task: str
    queue: str
    status: str
    attempts: int
    claimed_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    parents: tuple[int, ...]

    @property
    def seconds(self) -> float | None:
        """How long its last attempt ran, once finished (None before, or never started)."""
        if self.status not in FINISHED or self.claimed_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.claimed_at).total_seconds()


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The chain of jobs that decides the workflow's length: by the durations of their
    runs once every job finished ('durations'; a job that never ran counts 0 s), else by
    the number of links ('links': what still stands between the first job and the last)."""

    ids: tuple[int, ...]
    by: str
    seconds: float | None


def workflow_jobs(db: Database, job_id: int) -> list[WorkflowJob]:
    """The jobs of the workflow holding `job_id`, in id order (empty: no such job)."""
    return [
        WorkflowJob(**{**row, "parents": tuple(row["parents"])})
        for row in db.dicts(queries.JOB_WORKFLOW_LIST, id=job_id)
    ]


def critical_path(jobs: list[WorkflowJob]) -> CriticalPath:
    """The longest chain through the DAG (parents always have smaller ids: one pass in id
    order is a topological one). Unfinished, of two chains as long, the one with more
    jobs still to finish: what stands between now and the end."""
    if not jobs:
        return CriticalPath((), "links", None)
    # Finished by status, not by run time: a job its parent's failure ended (or an
    # operator's cancel, while it waited or was queued) never ran, has no claim, and counts
    # 0 s; it would otherwise keep a finished workflow "unfinished" for good.
    finished = all(job.status in FINISHED for job in jobs)
    best: dict[int, tuple[float, int, tuple[int, ...]]] = {}
    for job in sorted(jobs, key=lambda j: j.id):
        length, pending, ids = max(
            (best[p] for p in job.parents if p in best), default=(0.0, 0, ())
        )
        weight = (job.seconds or 0.0) if finished else 1.0
        best[job.id] = (length + weight, pending + (job.status not in FINISHED), (*ids, job.id))
    total, _, ids = max(best.values())
    return CriticalPath(ids, "durations" if finished else "links", total if finished else None)


def summary(jobs: list[WorkflowJob]) -> dict[str, Any]:
    """How many jobs are in each status."""
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return counts
