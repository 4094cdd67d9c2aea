"""`pgkick status`, `retry`, `cancel`, `purge` and `reap`: the operator's commands on
queues and jobs (`limit`, `pause` and `resume`: pgkick.cli.flow_commands).

Why apart from pgkick.cli.main: main builds the parser and keeps the commands an app
developer starts with (`migrate`, `enqueue`); these act on what is already queued,
through `pgkick.cli.operations` (the checks the dashboard's buttons share) and the
same `OperatorStore`.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pgkick import config
from pgkick.cli import bulk, database, operations
from pgkick.cli.inspect import Command, add_filter_arguments, filter_values
from pgkick.cli.interrupt import BetweenBatches
from pgkick.cli.types import extra_attempts, job_id, positive, span
from pgkick.errors import Interrupted, InvalidArgument, UsageError
from pgkick.kick.default import default_kicker
from pgkick.kick.kickers import NoKicker
from pgkick.store.inspect import FILTERS
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
    if args.ids and (args.queue or args.task or args.all):  # acted on nothing, and said none
        raise UsageError("name job ids or give --queue/--task/--all, not both")
    if not args.ids:
        return None
    operations.check_ids(store, list(args.ids), status)
    return list(args.ids)


# The filters that make a command a bulk action (counted first, acted on with --yes):
# `pgkick jobs`' all but --task and --queue, which retry and cancel took before, alone, as a
# selection acted on at once (purge had neither: there they are filters too, see _bulk).
BULK_FILTERS = tuple(name for name in FILTERS if name not in ("task", "queue"))


def _bulk(args: argparse.Namespace, action: str) -> bulk.JobSelection | None:
    """The selection of a bulk action, or None for the forms from before (ids, --queue,
    --task, --all, purge --older-than), which act at once as they always did (and with
    --dry-run count what they would take: ids, --older-than; see `counted`)."""
    values = filter_values(args)  # an empty one refused first, in every form
    # purge had no --queue/--task before: there they are filters too
    triggers = BULK_FILTERS + (("task", "queue") if action == "purge" else ())
    filtered = any(getattr(args, name) is not None for name in triggers)
    named = getattr(args, "ids", None) or getattr(args, "older_than", None) is not None
    if not filtered and (not args.dry_run or named):
        return None
    if getattr(args, "ids", None):
        raise UsageError("name job ids or give filters, not both")
    if getattr(args, "older_than", None) is not None:
        raise UsageError("--older-than with filters: give the created range as --until")
    selection = bulk.JobSelection(**values)
    if selection.empty and not getattr(args, "all", False):
        if action == "purge":  # purge has no --all: its every finished job is --older-than 0d
            raise UsageError("give a filter, or --older-than 0d for every finished job")
        raise UsageError(f"give a filter, or --all for every job {action} applies to")
    return selection


def _bulk_command(
    args: argparse.Namespace,
    action: str,
    act: Callable[[OperatorStore, bulk.JobSelection], dict[str, Any]],
) -> dict[str, Any]:
    """Count what `action` would take; act (a batch at a time) only with --yes."""
    selection = _bulk(args, action)
    if selection is None:  # the callers ask _bulk first
        raise UsageError(f"{action}: give a filter")
    if not 1 <= args.batch <= bulk.MAX_BATCH:  # purge's --batch takes more for --older-than
        raise InvalidArgument(
            f"--batch {args.batch}: with filters, 1..{bulk.MAX_BATCH} jobs a transaction"
        )
    with database.operator_store(args) as store:
        ids, counts = bulk.select(store, selection, action)
        if args.dry_run or not args.yes:
            more: dict[str, int] = {}
            if action == "retry" and ids:  # refused as the retry would be (unique keys)
                operations.check_retry(store, ids=ids, queue=None, task=None)
            if action == "retry":  # the dependants outside the selection it would revive
                more["would_revive_up_to"] = store.revivable_count(ids) if ids else 0
            return counted(action, counts, "run it again with --yes", **more)
        return act(store, selection)


def counted(action: str, counts: dict[str, int], to_act: str, **more: int) -> dict[str, Any]:
    """A dry run's answer: how many jobs `action` would take, by status, and what more
    it would do (`more`); `to_act`: how to act on them."""
    total = sum(counts.values())
    return {
        "would_" + action: total,
        "by_status": counts,
        **more,
        "dry_run": True,
        "to_act": to_act if total else "nothing to do",
    }


def _named_dry_run(store: OperatorStore, action: str, ids: list[int] | None) -> dict[str, Any]:
    """The dry run of `retry|cancel IDS` (checked by `_selection` as the action checks
    them, and a retry's unique keys too): their count by status, nothing written."""
    named = ids or []
    more: dict[str, int] = {}
    if action == "retry":
        operations.check_retry(store, ids=named, queue=None, task=None)
        more["would_revive_up_to"] = store.revivable_count(named)
    counts = Counter(job["status"] for job in store.get_many(named))
    return counted(action, dict(sorted(counts.items())), AGAIN, **more)


AGAIN = "run it again without --dry-run"  # the forms from before act at once


def _older_form(args: argparse.Namespace) -> bulk.JobSelection:
    """`--queue`/`--task`/`--all` alone (retry, cancel): still acted on at once, without --yes,
    but a batch per transaction, as a filter's (pgkick.cli.bulk). Why: one statement held its
    locks to the end and a Ctrl-C unwound it whole; their dry run counted this selection."""
    return bulk.JobSelection(queue=args.queue, task=args.task)


def cmd_retry(args: argparse.Namespace) -> dict[str, Any]:
    """Put failed jobs back in the queue, with --extra-attempts more tries, and kick; the
    dependants their failure had failed or cancelled wait for them again (counted)."""
    # a kicker that cannot be built fails before the write (it failed after its commit);
    # a dry run writes and kicks nothing
    kicker = NoKicker() if args.dry_run else default_kicker()
    if _bulk(args, "retry") is not None:

        def retry(store: OperatorStore, selection: bulk.JobSelection) -> dict[str, Any]:
            retried = bulk.retry_matching(  # kicks each batch's queues after its commit
                store,
                selection,
                extra_attempts=args.extra_attempts,
                batch=args.batch,
                kicker=kicker,
            )
            return {"retried": len(retried.jobs), "revived_dependants": retried.revived}

        return _bulk_command(args, "retry", retry)
    with database.operator_store(args) as store:
        ids = _selection(args, store, "failed")
        if args.dry_run:
            return _named_dry_run(store, "retry", ids)
        if ids is None:  # --queue/--task/--all: a batch per transaction, each batch kicked
            retried = bulk.retry_matching(
                store,
                _older_form(args),
                extra_attempts=args.extra_attempts,
                batch=args.batch,
                kicker=kicker,
            )
        else:
            retried = operations.retry(store, ids=ids, extra_attempts=args.extra_attempts)
            operations.kick_queues(retried.jobs, kicker)
    return {
        "retried": [job_id for job_id, _ in retried.jobs],
        "revived_dependants": retried.revived,
    }


def cmd_cancel(args: argparse.Namespace) -> dict[str, Any]:
    """Cancel jobs: waiting and queued ones fail at once; running ones are marked, and fail when
    they stop."""
    if _bulk(args, "cancel") is not None:

        def cancel(store: OperatorStore, selection: bulk.JobSelection) -> dict[str, Any]:
            cancelled, marked = bulk.cancel_matching(store, selection, batch=args.batch)
            return {"cancelled": len(cancelled), "cancelling": len(marked)}

        return _bulk_command(args, "cancel", cancel)
    with database.operator_store(args) as store:
        ids = _selection(args, store, "waiting|queued|running")
        if args.dry_run:
            return _named_dry_run(store, "cancel", ids)
        if ids is None:  # --queue/--task/--all: a batch per transaction (kicks what it released)
            cancelled, marked = bulk.cancel_matching(store, _older_form(args), batch=args.batch)
            return {"cancelled": cancelled, "cancelling": marked}
        cancelled, marked, released = operations.cancel(store, ids=ids)
    operations.kick_released(released, default_kicker)
    return {"cancelled": cancelled, "cancelling": marked}


def cmd_purge(args: argparse.Namespace) -> dict[str, Any]:
    """Delete done and failed jobs finished longer ago than --older-than, in batches (0d:
    every finished job, counted first, deleted only with --yes)."""
    if _bulk(args, "purge") is not None:

        def purge(store: OperatorStore, selection: bulk.JobSelection) -> dict[str, Any]:
            return {"purged": len(bulk.purge_matching(store, selection, batch=args.batch))}

        return _bulk_command(args, "purge", purge)
    if args.older_than is None:
        raise UsageError("give --older-than (e.g. 7d), or filters (see pgkick purge --help)")
    everything = not args.older_than  # 0d: every finished job, counted first as by filter
    with database.operator_store(args) as store:
        if args.dry_run or (everything and not args.yes):
            to_act = "run it again with --yes" if everything else AGAIN
            return counted("purge", store.purgeable_count(args.older_than), to_act)
        return {"purged": _purge_older_than(store, args.older_than, args.batch)}


def _purge_older_than(store: OperatorStore, older_than: timedelta, batch: int) -> int:
    """`purge --older-than`: a statement of `batch` jobs at a time, each committed. Why under
    BetweenBatches: a Ctrl-C said "nothing of it written" while the statements before it had
    purged their jobs; now the statement under way finishes, and the command says how many
    went, as the other bulk forms do (pgkick.cli.bulk)."""
    with BetweenBatches() as ctrl_c:
        purged, whole = store.purge_while(older_than, batch=batch, more=lambda: not ctrl_c.pressed)
    if not whole:  # stopped by the Ctrl-C
        raise Interrupted(
            f"interrupted (Ctrl-C) after it purged {purged} jobs, committed; the rest are as "
            "they were: run the same command again for them"
        )
    return purged


def cmd_reap(args: argparse.Namespace) -> dict[str, Any]:
    """Run the reaper once: re-queue expired leases, kick ready queues, purge, report."""
    settings = config.Settings.from_env()
    with database.operator_store(args) as store:  # a role that may not purge: refused first
        return reap(store, default_kicker(), retention=settings.retention)


def _selection_arguments(sub: argparse.ArgumentParser, *, ids: bool = True) -> None:
    if ids:
        sub.add_argument("ids", nargs="*", type=job_id, help="job ids")
    sub.add_argument("--queue", help="every job of this queue")
    sub.add_argument("--task", help="every job of this task")
    sub.add_argument("--all", action="store_true", help="every job in that state")
    _bulk_arguments(sub)


def _bulk_arguments(sub: argparse.ArgumentParser) -> None:
    """`pgkick jobs`' filters and more: any of them makes the command count first."""
    sub.add_argument("--status", help="only the jobs in this status (one the action applies to)")
    add_filter_arguments(sub)
    sub.add_argument("--dry-run", action="store_true", help="count, change nothing")
    sub.add_argument("--yes", action="store_true", help="act on what a filter selects")


def _batch_argument(sub: argparse.ArgumentParser, default: int) -> None:
    sub.add_argument(
        "--batch",
        type=lambda text: positive(text, bulk.MAX_BATCH),
        default=default,
        help=f"jobs changed per transaction, with filters, --queue, --task or --all ({default})",
    )


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
    _batch_argument(retry, bulk.BATCH)
    retry.add_argument(
        "--extra-attempts", type=extra_attempts, default=1, help="more attempts to allow (1)"
    )
    cancel = command("cancel", cmd_cancel)
    _selection_arguments(cancel)
    _batch_argument(cancel, bulk.BATCH)
    purge = command("purge", cmd_purge)
    purge.add_argument(
        "--older-than", type=span, help="finished this long ago: 7d, 12h, 30m (0d: all, with --yes)"
    )
    purge.add_argument("--queue", help="only the jobs of this queue (with filters)")
    purge.add_argument("--task", help="only the jobs of this task (with filters)")
    _bulk_arguments(purge)
    purge.add_argument(
        "--batch", type=positive, default=10_000, help="jobs deleted per statement (10000)"
    )
    reap_command = command("reap", cmd_reap)
    return [status, retry, cancel, purge, reap_command]
