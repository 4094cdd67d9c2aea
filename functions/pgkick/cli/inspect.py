"""`pgkick jobs` and `pgkick job ID`: what the queue holds, read-only.

Why apart: the commands that change things are in main.py and queue_commands.py; these
two only read, through the same `JobReader` the dashboard uses (pgkick.store.inspect),
so what an operator sees in a shell is what the dashboard shows.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from pgkick.cli import database
from pgkick.cli.types import instant, whole
from pgkick.errors import InvalidArgument, JobNotFound
from pgkick.store.inspect import FILTERS, JobFilter, JobReader, parse_id

Command = Callable[[str, Callable[[argparse.Namespace], dict[str, Any]]], argparse.ArgumentParser]

ERRORS_KEPT = "only the last error is stored (last_error); earlier attempts' errors are not kept"


def _reader(args: argparse.Namespace) -> AbstractContextManager[JobReader]:
    return database.checked(JobReader, args)


def cmd_jobs(args: argparse.Namespace) -> dict[str, Any]:
    """List jobs, newest first, with filters; page on with the printed `--after N`."""
    filters = JobFilter(**filter_values(args))
    after = None if args.after is None else parse_id(args.after)
    with _reader(args) as store:
        page = store.page(filters, after=after, limit=args.limit)
    result = {"jobs": page.jobs, "next_after": page.next_after}
    if not args.json:
        print(render_jobs(page.jobs, page.next_after, page.looked_down_to))
    return result


def filter_values(args: argparse.Namespace) -> dict[str, Any]:
    """The filters as typed (None: not given), an empty one refused in the option's words.

    Why not JobFilter.of, which reads "" as no filter: that suits the dashboard's empty form
    fields, but `pgkick jobs --task ''` then listed every job while the bulk actions refused
    the same filter, as 'a non-empty string, or None' (a review of the CLI, F7)."""
    values = {name: getattr(args, name, None) for name in FILTERS}
    for name, value in values.items():
        if value == "":
            option = "--" + name.replace("_", "-")
            raise InvalidArgument(
                f"{option} is empty: give a value, or leave the option out for no filter"
            )
    return values


def cmd_job(args: argparse.Namespace) -> dict[str, Any]:
    """Show one job: payload, attempts, its error, result, timestamps and lease."""
    job_id = parse_id(args.id)
    with _reader(args) as store:
        job = store.job(job_id)
    if job is None:
        raise JobNotFound(f"job {job_id} does not exist: list jobs with `pgkick jobs`")
    job["errors"] = [job["last_error"]] if job["last_error"] else []
    job["errors_kept"] = ERRORS_KEPT
    if not args.json:
        print(render_job(job))
    return job


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat(sep=" ", timespec="seconds")


def render_jobs(jobs: list[dict[str, Any]], next_after: int | None, looked: int | None) -> str:
    header = ("id", "status", "task", "queue", "attempts", "created", "last error")
    lines = [header]
    for job in jobs:
        error = (job["last_error"] or "").splitlines()[0:1]
        lines.append(
            (
                str(job["id"]),
                job["status"],
                job["task"],
                job["queue"],
                f"{job['attempts']}/{job['max_attempts']}",
                _when(job["created_at"]),
                (error[0][:60] if error else ""),
            )
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header) - 1)]
    text = [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in lines
    ]
    if not jobs:
        text = ["no jobs" + (f" among ids {looked} and above" if looked else "")]
    if next_after is not None:
        text.append(f"next: --after {next_after}")
    return "\n".join(line.rstrip() for line in text)


def render_steps(steps: list[dict[str, Any]]) -> list[str]:
    """The durable steps' lines: name, attempt, duration (or a sleep's end), result."""
    if not steps:
        return []
    lines = [f"steps ({len(steps)}{'+' if len(steps) == 100 else ''}):"]
    for step in steps:
        took = f"sleep until {_when(step['wake_at'])}" if step["wake_at"] else "step"
        result = "-" if step["result"] is None else step["result"]
        cut = "..." if step["result_cut"] else ""
        lines.append(
            f"  {step['name']}  attempt {step['attempt']}  {step['duration_ms']} ms  {took}"
            f"  result: {result}{cut}"
        )
    return lines


def render_job(job: dict[str, Any]) -> str:
    lines = [
        f"job {job['id']}: {job['status']}",
        f"task: {job['task']}",
        f"queue: {job['queue']}",
        f"attempts: {job['attempts']}/{job['max_attempts']}",
        f"priority: {job['priority']}",
    ]
    for key, label in (("unique_key", "unique key"), ("group_key", "group")):
        if job[key] is not None:
            lines.append(f"{label}: {job[key]}")
    for key, label in (("parents", "after"), ("dependants", "dependants")):
        if job.get(key):  # the first 50 (sql/job_get.sql)
            lines.append(f"{label}: {', '.join(map(str, job[key]))}")
    if job.get("waiting_on"):
        lines.append(f"waiting on: {job['waiting_on']} parents")
    # In their own letters (not json's \u escapes), as the steps' results already are.
    payload = json.dumps(job["payload"], sort_keys=True, ensure_ascii=False)
    lines.append(f"payload: {payload}")
    result = "-" if job["result"] is None else json.dumps(job["result"], ensure_ascii=False)
    lines.append(f"result: {result}")
    lines += render_steps(job.get("steps", []))
    lines.append(f"errors ({ERRORS_KEPT}):")
    lines += [f"  {line}" for e in job["errors"] for line in e.splitlines()] or ["  none"]
    for key, label in (
        ("created_at", "created"),
        ("run_at", "run_at"),
        ("claimed_at", "started"),
        ("finished_at", "finished"),
    ):
        lines.append(f"{label}: {_when(job[key])}")
    lease = job["locked_until"]
    lines.append("lease: " + ("none" if lease is None else f"until {_when(lease)}"))
    if job["cancel_requested_at"] is not None:
        lines.append(f"cancel requested: {_when(job['cancel_requested_at'])}")
    return "\n".join(lines)


def add_filter_arguments(sub: argparse.ArgumentParser) -> None:
    """The options of JobFilter's fields past --status, --task and --queue, as `pgkick jobs`
    and the bulk retry, cancel and purge take them (those three each word their own way:
    pgkick.cli.queue_commands), so a filter's option is defined once."""
    sub.add_argument("--unique-key", help="only the jobs enqueued with this unique key")
    sub.add_argument("--group", help="only the jobs of this ordered group")
    sub.add_argument("--since", type=instant, help="created at or after (ISO time, or 7d ago)")
    sub.add_argument("--until", type=instant, help="created before (ISO time, or 7d ago)")
    sub.add_argument("--error", help="only the jobs whose last error contains this text")


def add_inspect_commands(command: Command) -> list[argparse.ArgumentParser]:
    jobs = command("jobs", cmd_jobs)
    jobs.add_argument("--status", help="waiting, queued, running, done or failed")
    jobs.add_argument("--task", help="only the jobs of this task")
    jobs.add_argument("--queue", help="only the jobs of this queue")
    add_filter_arguments(jobs)
    jobs.add_argument("--after", metavar="ID", help="the jobs older than this id (paging)")
    jobs.add_argument("--limit", type=whole, default=50, help="jobs a page (1..500, 50)")
    job = command("job", cmd_job)
    job.add_argument("id", metavar="ID", help="the job's id, as enqueue printed it")
    return [jobs, job]
