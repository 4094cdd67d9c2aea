"""`pgkick workflow ID`: a workflow (pgkick.Workflow) as one unit, read-only: its jobs,
their states, and its critical path.

Why from any job's id: the workflow's id is its first job's, but an operator usually
holds the id of the job that failed; both show the same workflow
(pgkick.store.workflows says how its jobs are found without a table of workflows).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from pgkick.cli import database
from pgkick.cli.inspect import Command
from pgkick.errors import JobNotFound
from pgkick.store.inspect import JobReader, parse_id
from pgkick.store.workflows import WorkflowJob, critical_path, summary, workflow_jobs


def cmd_workflow(args: argparse.Namespace) -> dict[str, Any]:
    """Show a workflow: its jobs, their states and its critical path (from any job's id)."""
    job_id = parse_id(args.id)
    with database.checked(JobReader, args) as store:
        jobs = workflow_jobs(store, job_id)
    if not jobs:
        raise JobNotFound(f"job {job_id} does not exist: list jobs with `pgkick jobs`")
    path = critical_path(jobs)
    result = {
        "workflow": jobs[0].id,
        "statuses": summary(jobs),
        "jobs": [asdict(job) for job in jobs],
        "critical_path": asdict(path),
    }
    if not args.json:
        print(render_workflow(jobs, result))
    return result


def render_workflow(jobs: list[WorkflowJob], result: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result["statuses"].items()))
    lines = [f"workflow {result['workflow']}: {len(jobs)} jobs ({counts})"]
    rows = [("id", "status", "task", "queue", "after", "ran", "last error")]
    for job in jobs:
        ran = "-" if job.seconds is None else f"{job.seconds:.3f}s"
        error = (job.last_error or "").splitlines()[:1]
        after = ",".join(map(str, job.parents)) or "-"
        rows.append(
            (
                str(job.id),
                job.status,
                job.task,
                job.queue,
                after,
                ran,
                error[0][:60] if error else "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines += [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]
    path = result["critical_path"]
    chain = " -> ".join(map(str, path["ids"]))
    by = f"{path['seconds']:.3f}s of runs" if path["by"] == "durations" else "links, unfinished"
    lines.append(f"critical path ({by}): {chain}")
    return "\n".join(lines)


def add_workflow_command(command: Command) -> argparse.ArgumentParser:
    workflow = command("workflow", cmd_workflow)
    workflow.add_argument("id", metavar="ID", help="the workflow's id, or any of its jobs' ids")
    return workflow
