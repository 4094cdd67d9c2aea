"""`pgkick status`, `retry`, `cancel`, `purge`, `reap` and `limit`: the operator's
commands on queues and jobs.

Why apart from pgkick.cli.main: main builds the parser and keeps the commands an app
developer starts with (`migrate`, `enqueue`); these act on what is already queued,
through `pgkick.cli.operations` (the checks the dashboard's buttons share) and the
same `OperatorStore`.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from pgkick import config
from pgkick.cli import database, operations
from pgkick.cli.inspect import Command
from pgkick.cli.types import extra_attempts, positive, span
from pgkick.errors import UsageError
from pgkick.kick.default import default_kicker
from pgkick.store import groups
from pgkick.store.operator import OperatorStore
from pgkick.worker.reaper import reap


def cmd_status(args: argparse.Namespace) -> dict[str, Any]:
    """Per queue: jobs by status, oldest ready age, next lease expiry; the table's health;
    `stranded`: queues with jobs ready for longer than --stranded-after and no worker."""
    with database.operator_store(args) as store:
        queues = store.stats_by_queue(args.stranded_after)
        stranded = {q["queue"]: q["stranded"] for q in queues if q["stranded"]}
        return {"queues": queues, "stranded": stranded, "table": store.table_health()}


def _selection(args: argparse.Namespace, store: OperatorStore, status: str) -> list[int] | None:
    """The ids asked for (all in `status`, "a|b" for either), or None for a queue/task filter."""
    if not (args.ids or args.queue or args.task or args.all):
        raise UsageError("name job ids, or --queue/--task, or --all")
    if not args.ids:
        return None
    operations.check_ids(store, list(args.ids), status)
    return list(args.ids)


def cmd_retry(args: argparse.Namespace) -> dict[str, Any]:
    """Put failed jobs back in the queue, with --extra-attempts more tries, and kick."""
    with database.operator_store(args) as store:
        ids = _selection(args, store, "failed")
        retried = operations.retry(
            store, ids=ids, queue=args.queue, task=args.task, extra_attempts=args.extra_attempts
        )
    operations.kick_queues(retried, default_kicker())
    return {"retried": [job_id for job_id, _ in retried]}


def cmd_cancel(args: argparse.Namespace) -> dict[str, Any]:
    """Cancel jobs: queued ones fail at once; running ones are marked, and fail when they stop."""
    with database.operator_store(args) as store:
        ids = _selection(args, store, "queued|running")
        cancelled, marked = operations.cancel(store, ids=ids, queue=args.queue, task=args.task)
    return {"cancelled": cancelled, "cancelling": marked}


def cmd_purge(args: argparse.Namespace) -> dict[str, Any]:
    """Delete done and failed jobs finished longer ago than --older-than, in batches."""
    with database.operator_store(args) as store:
        return {"purged": store.purge_finished(args.older_than, batch=args.batch)}


def cmd_reap(args: argparse.Namespace) -> dict[str, Any]:
    """Run the reaper once: re-queue expired leases, kick ready queues, purge, report."""
    settings = config.Settings.from_env()
    with database.operator_store(args) as store:
        return reap(store, default_kicker(), retention=settings.retention)


def cmd_limit(args: argparse.Namespace) -> dict[str, Any]:
    """Set (QUEUE N), remove (QUEUE --clear) or list the most jobs of a queue running at once."""
    with database.operator_store(args) as store:
        if args.queue is not None:
            if (args.max_running is None) == (not args.clear):
                raise UsageError("give QUEUE and N, or QUEUE --clear, or nothing to list")
            if args.max_running is not None and args.max_running < 1:
                raise UsageError(
                    f"N={args.max_running}: a limit lets at least 1 job run; to remove "
                    f"the queue's limit: pgkick limit {args.queue} --clear"
                )
            groups.set_queue_limit(store, args.queue, args.max_running)
        limits = groups.queue_limits(store)
    return {"limits": [{"queue": q, "max_running": m, "running": r} for q, m, r in limits]}


def _selection_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("ids", nargs="*", type=int, help="job ids")
    sub.add_argument("--queue", help="every job of this queue")
    sub.add_argument("--task", help="every job of this task")
    sub.add_argument("--all", action="store_true", help="every job in that state")


def add_queue_commands(command: Command) -> list[argparse.ArgumentParser]:
    """Register the commands; returns their parsers (main adds --schema to each)."""
    status = command("status", cmd_status)
    status.add_argument(
        "--stranded-after",
        type=span,
        default=timedelta(minutes=1),
        help="a ready job waiting this long with no worker is reported stranded (1m)",
    )
    retry = command("retry", cmd_retry)
    _selection_arguments(retry)
    retry.add_argument(
        "--extra-attempts", type=extra_attempts, default=1, help="more attempts to allow (1)"
    )
    cancel = command("cancel", cmd_cancel)
    _selection_arguments(cancel)
    purge = command("purge", cmd_purge)
    purge.add_argument("--older-than", type=span, required=True, help="e.g. 7d, 12h, 30m")
    purge.add_argument(
        "--batch", type=positive, default=10_000, help="jobs deleted per statement (10000)"
    )
    reap_command = command("reap", cmd_reap)
    limit = command("limit", cmd_limit)
    limit.add_argument("queue", nargs="?", help="the queue (none: list every limit)")
    limit.add_argument(
        "max_running", nargs="?", type=int, metavar="N", help="at most N of its jobs at once"
    )
    limit.add_argument("--clear", action="store_true", help="remove the queue's limit")
    return [status, retry, cancel, purge, reap_command, limit]
