"""`pgkick status`, `retry`, `cancel`, `purge`, `reap`, `limit`, `pause` and `resume`: the
operator's commands on queues and jobs.

Why apart from pgkick.cli.main: main builds the parser and keeps the commands an app
developer starts with (`migrate`, `enqueue`); these act on what is already queued,
through `pgkick.cli.operations` (the checks the dashboard's buttons share) and the
same `OperatorStore`.
"""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta
from typing import Any

from pgkick import config
from pgkick.cli import database, operations
from pgkick.cli.inspect import Command
from pgkick.cli.types import extra_attempts, positive, rate, span
from pgkick.errors import UsageError
from pgkick.kick.default import default_kicker
from pgkick.store import flow, groups
from pgkick.store.operator import OperatorStore
from pgkick.worker.reaper import reap

log = logging.getLogger("pgkick.cli")


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
    """Set or remove a queue's limits (running N, --rate N/period, --concurrency N), or list
    every queue's."""
    changes = (args.max_running, args.rate, args.concurrency)
    removals = (args.clear, args.no_rate, args.no_concurrency)
    if args.queue is None and (any(c is not None for c in changes) or any(removals)):
        raise UsageError("name the QUEUE to limit")
    if args.max_running is not None and args.max_running < 1:
        raise UsageError(
            f"N={args.max_running}: a limit lets at least 1 job run; to remove "
            f"the queue's limit: pgkick limit {args.queue} --clear"
        )
    if args.queue is not None and all(c is None for c in changes) and not any(removals):
        raise UsageError(
            "give QUEUE and N, --rate N/period or --concurrency N (or --clear, --no-rate, "
            "--no-concurrency), or nothing to list"
        )
    names = ("N", "--rate", "--concurrency")
    for value, removed, name in zip(changes, removals, names, strict=True):
        if value is not None and removed:
            raise UsageError(f"{name} and its removal in one command: give one")
    with database.operator_store(args) as store:
        if args.queue is not None:
            if args.max_running is not None or args.clear:
                groups.set_queue_limit(store, args.queue, args.max_running)
            if args.rate is not None or args.no_rate:
                flow.set_queue_rate(store, args.queue, *(args.rate or (None, None)))
            if args.concurrency is not None or args.no_concurrency:
                flow.set_queue_concurrency(store, args.queue, args.concurrency)
        return {"limits": groups.queue_limits(store)}


def cmd_pause(args: argparse.Namespace) -> dict[str, Any]:
    """Pause a queue: its claims take nothing, nobody kicks it; jobs stay queued."""
    with database.operator_store(args) as store:
        flow.pause_queue(store, args.queue)
    return {"paused": args.queue}


def cmd_resume(args: argparse.Namespace) -> dict[str, Any]:
    """Resume a paused queue and kick it once."""
    kicker = default_kicker()  # a kicker that cannot be built fails before the write
    with database.operator_store(args) as store:
        flow.resume_queue(store, args.queue)
    try:
        kicker.kick(args.queue, "resume")
    except Exception as exc:  # resumed all the same: the next enqueue, sweep or reaper kicks
        log.warning("could not kick queue %s after resuming it (%s)", args.queue, exc)
        return {"resumed": args.queue, "kicked": False}
    return {"resumed": args.queue, "kicked": True}


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
    limit.add_argument("--clear", action="store_true", help="remove the queue's running limit")
    limit.add_argument(
        "--rate", type=rate, metavar="N/PERIOD", help="at most N starts per key per period (10/1m)"
    )
    limit.add_argument("--no-rate", action="store_true", help="remove the queue's rate")
    limit.add_argument(
        "--concurrency", type=positive, metavar="N", help="at most N running per group key"
    )
    limit.add_argument(
        "--no-concurrency", action="store_true", help="remove the concurrency per group key"
    )
    pause = command("pause", cmd_pause)
    pause.add_argument("queue", help="the queue to pause")
    resume = command("resume", cmd_resume)
    resume.add_argument("queue", help="the queue to resume (and kick once)")
    return [status, retry, cancel, purge, reap_command, limit, pause, resume]
