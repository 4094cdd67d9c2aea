"""`pgkick limit`, `pause` and `resume`: the operator's commands on a queue's flow.

Why apart from pgkick.cli.queue_commands: those act on the jobs queued; these on the
queue's settings the claim enforces (pgkick.store.flow, pgkick.store.groups), through
the same `OperatorStore`.
"""

from __future__ import annotations

import argparse
from typing import Any

from pgkick.cli import database, operations
from pgkick.cli.inspect import Command
from pgkick.cli.types import concurrency, rate, whole
from pgkick.errors import UsageError
from pgkick.kick.default import default_kicker
from pgkick.store import flow, groups
from pgkick.validation import check_name


def cmd_limit(args: argparse.Namespace) -> dict[str, Any]:
    """Set or remove a queue's limits (running N, --rate N/period, --concurrency N), show
    them (the queue alone), or list every queue's. A change that frees held jobs (a rate
    removed or raised, a concurrency raised: pgkick.store.flow.loosens) kicks the queue
    once it is committed, as `resume` does."""
    changes = (args.max_running, args.rate, args.concurrency)
    removals = (args.clear, args.no_rate, args.no_concurrency)
    if args.queue is None and (any(c is not None for c in changes) or any(removals)):
        raise UsageError("name the QUEUE to limit")
    if args.max_running is not None:  # refused in the command's words, before the store
        groups.check_count(
            "N", args.max_running, f"to remove the queue's limit: pgkick limit {args.queue} --clear"
        )
    shown = args.queue is not None and all(c is None for c in changes) and not any(removals)
    if shown:  # the queue alone: its limits, read-only
        check_name("queue", args.queue)
    names = ("N", "--rate", "--concurrency")
    for value, removed, name in zip(changes, removals, names, strict=True):
        if value is not None and removed:
            raise UsageError(f"{name} and its removal in one command: give one")
    kicker = None
    with database.operator_store(args) as store:
        if shown:
            return {"limits": [q for q in groups.queue_limits(store) if q["queue"] == args.queue]}
        if args.queue is None:
            return {"limits": groups.queue_limits(store)}
        rate_change = args.rate if args.rate is not None or args.no_rate else flow.KEEP
        concurrency_change = (
            args.concurrency if args.concurrency is not None or args.no_concurrency else flow.KEEP
        )
        if flow.loosens(store, args.queue, rate=rate_change, concurrency=concurrency_change):
            kicker = default_kicker()  # frees held jobs: a kicker that cannot be built fails
            # before the write
        if args.max_running is not None or args.clear:
            groups.set_queue_limit(store, args.queue, args.max_running)
        if args.rate is not None or args.no_rate:
            flow.set_queue_rate(store, args.queue, *(args.rate or (None, None)))
        if args.concurrency is not None or args.no_concurrency:
            flow.set_queue_concurrency(store, args.queue, args.concurrency)
        limits = groups.queue_limits(store)
    if kicker is None:  # nothing freed: nothing to kick, nor to say about a kick
        return {"limits": limits}
    # Jobs the old limit held wait, else, for the wake-up booked under it (up to a day): an
    # operator's kick, as `resume`'s; failed, a wake-up instead (the limits set all the same)
    return {"limits": limits, "kicked": operations.kick_or_wake(kicker, args.queue, "manual")}


def cmd_pause(args: argparse.Namespace) -> dict[str, Any]:
    """Pause a queue: its claims take nothing, nobody kicks it; jobs stay queued."""
    with database.operator_store(args) as store:
        flow.pause_queue(store, args.queue)
    return {"paused": args.queue}


def cmd_resume(args: argparse.Namespace) -> dict[str, Any]:
    """Resume a paused queue and kick it once (a queue not paused: says so, changes nothing)."""
    kicker = default_kicker()  # a kicker that cannot be built fails before the write
    with database.operator_store(args) as store:
        if not flow.resume_queue(store, args.queue):  # nothing to resume: no write, no kick
            return {"not_paused": args.queue, "kicked": False}
    # an operator's kick, as `pgkick kick`; failed, a wake-up instead (resumed all the same)
    kicked = operations.kick_or_wake(kicker, args.queue, "manual")
    return {"resumed": args.queue, "kicked": kicked}


def add_flow_commands(command: Command) -> list[argparse.ArgumentParser]:
    """Register the commands; returns their parsers (main adds --schema to each)."""
    limit = command("limit", cmd_limit)
    limit.add_argument(
        "queue", nargs="?", help="the queue (alone: show its limits; none: list every queue's)"
    )
    limit.add_argument(
        "max_running", nargs="?", type=whole, metavar="N", help="at most N of its jobs at once"
    )
    limit.add_argument("--clear", action="store_true", help="remove the queue's running limit")
    limit.add_argument(
        "--rate", type=rate, metavar="N/PERIOD", help="at most N starts per key per period (10/1m)"
    )
    limit.add_argument("--no-rate", action="store_true", help="remove the queue's rate")
    limit.add_argument(
        "--concurrency", type=concurrency, metavar="N", help="at most N running per group key"
    )
    limit.add_argument(
        "--no-concurrency", action="store_true", help="remove the concurrency per group key"
    )
    pause = command("pause", cmd_pause)
    pause.add_argument("queue", help="the queue to pause")
    resume = command("resume", cmd_resume)
    resume.add_argument("queue", help="the queue to resume (and kick once)")
    return [limit, pause, resume]
