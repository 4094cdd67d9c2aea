"""The `pgkick` command: operations from a shell, each with --help, --json and --dsn.

Why thin: each command is a library call an app or a Lambda also makes, so what
an operator runs is what production runs. Every failure is one clear line on
stderr and a non-zero exit, never a traceback, and bad input writes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from importlib.metadata import entry_points
from typing import Any

from pgkick import config
from pgkick.aws.schedules import add_schedule_commands
from pgkick.cli import database, operations
from pgkick.cli.inspect import add_inspect_commands
from pgkick.cli.output import json_value, summary, text, tooling_missing, versions
from pgkick.cli.types import extra_attempts, positive, schema_name, span, wait_seconds
from pgkick.connections.db import DatabaseError
from pgkick.connections.redact import redact
from pgkick.errors import JobFailed, PgkickError, UsageError
from pgkick.kick.default import default_kicker
from pgkick.producer import after_commit
from pgkick.producer import enqueue as producer
from pgkick.store import groups
from pgkick.store import migrations as schema
from pgkick.store.operator import OperatorStore
from pgkick.tasks import results
from pgkick.tasks.registry import registry
from pgkick.validation import check_name
from pgkick.worker.reaper import reap

Handler = Callable[[argparse.Namespace], dict[str, Any]]
PRINT_THEIR_OWN = ("demo", "bench", "jobs", "job")  # a report or a table, unless --json


LOCAL_WAIT = 60.0  # seconds `pgkick enqueue` waits for its job by default with PGKICK_KICKER=local


def _local_wait(kicker: object) -> float:
    """A development kicker (the local stack) runs the job within seconds: wait for it by
    default, so the command shows how it ended; a production kicker's worker may be far."""
    return LOCAL_WAIT if type(kicker).__module__.startswith("pgkick_dev.") else 0.0


def _store(args: argparse.Namespace) -> AbstractContextManager[OperatorStore]:
    """A store on a migrated database (a clear error if the schema is missing or newer)."""
    return database.checked(OperatorStore, args)


def cmd_migrate(args: argparse.Namespace) -> dict[str, Any]:
    """Apply pgkick's schema migrations (idempotent, safe to run concurrently)."""
    migrations = schema.MigrationStore
    with migrations.open(
        database.dsn(args), schema=args.schema, application_name="pgkick-cli"
    ) as store:
        report = schema.migrate(store)
        roles = schema.create_roles(store) if args.roles else []
    result: dict[str, Any] = {
        "applied": report.applied,
        "version": report.version,
        "schema": store.schema,
    }
    return result | ({"roles": roles} if roles else {})


def cmd_enqueue(args: argparse.Namespace) -> dict[str, Any]:
    """Enqueue one job and kick a worker (PGKICK_KICKER decides how)."""
    try:
        payload = json.loads(args.payload)
    except (ValueError, RecursionError) as exc:
        reason = exc if isinstance(exc, ValueError) else "nested too deeply"
        raise UsageError(f"--payload is not JSON: {reason}") from None
    if config.task_modules():  # the app's tasks known: a misspelt TASK is refused, unwritten
        registry.load(config.task_modules())
        registry.check_known(check_name("task", args.task))
    kicker = default_kicker()
    with _store(args) as store:  # one connection: schema checked, insert (autocommitted)
        enqueuer = producer.Enqueuer(store)
        job_id = enqueuer.enqueue(
            payload,
            task=args.task,
            queue=args.queue,
            delay=args.delay,
            max_attempts=args.max_attempts,
            priority=args.priority,
            group=args.group,
            unique_key=args.unique_key,
        )
        # Committed: from here nothing may fail the command (a retry would enqueue twice).
        after_commit.kick_committed(enqueuer.queued, kicker, lambda: contextlib.nullcontext(store))
        wait = args.wait if args.wait is not None else _local_wait(kicker)
        if wait and enqueuer.queued:  # lets the job run before we answer (its own statement)
            with contextlib.suppress(TimeoutError, PgkickError):  # then read its row below
                results.wait(job_id, timeout=wait, dsn=database.dsn(args))
        if not enqueuer.queued:  # a live job holds its unique key: nothing was written
            return {"id": job_id, "duplicate": True}
        (job,) = enqueuer.queued  # what the insert returned: pgkick_producer may read only this
        result = {"id": job_id, "queue": job.queue, "run_at": job.run_at.isoformat()}
        try:
            (row,) = store.get_many([job_id])
            result["status"] = row["status"]
        except DatabaseError:  # a producer role may not read status: leave it out
            return result
    if row["status"] == "failed":  # it ran while we waited, and failed: say why, exit non-zero
        raise JobFailed(
            job_id,
            f"{row['last_error'] or 'no error recorded'} (after {row['attempts']} of "
            f"{row['max_attempts']} attempts; see `pgkick job {job_id}`)",
        )
    return result


def cmd_status(args: argparse.Namespace) -> dict[str, Any]:
    """Per queue: jobs by status, oldest ready age, next lease expiry; the table's health;
    `stranded`: queues with jobs ready for longer than --stranded-after and no worker."""
    with _store(args) as store:
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
    with _store(args) as store:
        ids = _selection(args, store, "failed")
        retried = operations.retry(
            store, ids=ids, queue=args.queue, task=args.task, extra_attempts=args.extra_attempts
        )
    operations.kick_queues(retried, default_kicker())
    return {"retried": [job_id for job_id, _ in retried]}


def cmd_cancel(args: argparse.Namespace) -> dict[str, Any]:
    """Cancel jobs: queued ones fail at once; running ones are marked, and fail when they stop."""
    with _store(args) as store:
        ids = _selection(args, store, "queued|running")
        cancelled, marked = operations.cancel(store, ids=ids, queue=args.queue, task=args.task)
    return {"cancelled": cancelled, "cancelling": marked}


def cmd_purge(args: argparse.Namespace) -> dict[str, Any]:
    """Delete done and failed jobs finished longer ago than --older-than, in batches."""
    with _store(args) as store:
        return {"purged": store.purge_finished(args.older_than, batch=args.batch)}


def cmd_reap(args: argparse.Namespace) -> dict[str, Any]:
    """Run the reaper once: re-queue expired leases, kick ready queues, purge, report."""
    settings = config.Settings.from_env()
    with _store(args) as store:
        return reap(store, default_kicker(), retention=settings.retention)


def cmd_limit(args: argparse.Namespace) -> dict[str, Any]:
    """Set (QUEUE N), remove (QUEUE --clear) or list the most jobs of a queue running at once."""
    with _store(args) as store:
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


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, default=json_value))
        return
    for key, value in result.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            print(f"{key}:")
            for row in value:
                print("  " + "  ".join(f"{k}={text(v)}" for k, v in row.items()))
        elif isinstance(value, dict):
            print(f"{key}:" + ("" if value else " none"))
            for k, v in value.items():
                print(f"  {k}: {text(v)}")
        else:
            print(f"{key}: {text(value)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgkick", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=versions())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Handler) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary(handler.__doc__), description=handler.__doc__)
        sub.add_argument("--dsn", help="PostgreSQL connection string (default: $DATABASE_URL)")
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        sub.set_defaults(handler=handler)
        return sub

    def selection(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("ids", nargs="*", type=int, help="job ids")
        sub.add_argument("--queue", help="every job of this queue")
        sub.add_argument("--task", help="every job of this task")
        sub.add_argument("--all", action="store_true", help="every job in that state")

    migrate = command("migrate", cmd_migrate)
    migrate.add_argument(
        "--roles",
        action="store_true",
        help="also create and grant pgkick_producer, pgkick_worker, pgkick_maintainer",
    )
    enqueue = command("enqueue", cmd_enqueue)
    enqueue.add_argument("task", help="the task's registered name (@pgkick.task)")
    enqueue.add_argument("--payload", default="{}", help="the job's JSON payload")
    enqueue.add_argument("--queue", default="default", help="the job's queue (default)")
    enqueue.add_argument("--delay", type=float, help="seconds before the job is due")
    enqueue.add_argument(  # validated by the producer
        "--max-attempts", type=int, default=5, help="attempts before it fails for good (5)"
    )
    enqueue.add_argument("--priority", type=int, default=0, help="-100..100, higher first")
    enqueue.add_argument("--group", help="jobs of one group run one at a time")
    enqueue.add_argument("--unique-key", help="skip if a queued or running job has this key")
    enqueue.add_argument(
        "--wait",
        type=wait_seconds,
        default=None,
        help="seconds to wait for the job to finish, then exit 1 if it failed (0: don't; "
        f"default: {LOCAL_WAIT:g} with the local kicker, else 0)",
    )
    status = command("status", cmd_status)
    status.add_argument(
        "--stranded-after",
        type=span,
        default=timedelta(minutes=1),
        help="a ready job waiting this long with no worker is reported stranded (1m)",
    )
    retry = command("retry", cmd_retry)
    selection(retry)
    retry.add_argument(
        "--extra-attempts", type=extra_attempts, default=1, help="more attempts to allow (1)"
    )
    selection(command("cancel", cmd_cancel))
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
    inspect = add_inspect_commands(command)
    operations = (migrate, enqueue, status, retry, purge, reap_command, limit, *inspect)
    for sub in (*operations, commands.choices["cancel"]):
        sub.add_argument(
            "--schema",
            type=schema_name,
            help=f"schema of pgkick's tables (default: $PGKICK_SCHEMA, {config.DEFAULT_SCHEMA})",
        )
    add_schedule_commands(command)
    for plugin in entry_points(group="pgkick.commands"):  # demo, bench, awake: pgkick-dev
        plugin.load()(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # As `python -m` does: the app's folder is importable, so PGKICK_TASKS=myapp.tasks is
    # found when the command runs from the folder that holds myapp (the console script
    # puts only its own bin/ folder on the path).
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    parser = build_parser()
    missing = tooling_missing(parser, sys.argv[1:] if argv is None else argv)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        # --schema reaches every layer, and the workers a local kicker starts, for the
        # command's duration (pgkick.config.overriding: os.environ is never written)
        with config.overriding(
            schema=getattr(args, "schema", None), database_url=getattr(args, "dsn", None)
        ):
            result = args.handler(args)
    except (
        PgkickError,
        TimeoutError,
        ValueError,
        TypeError,
        DatabaseError,
    ) as exc:
        message = redact(" ".join(str(exc).split()), [args.dsn, config.app_settings().database_url])
        print(f"pgkick {args.command}: {message}", file=sys.stderr)
        return 1 if isinstance(exc, UsageError | JobFailed) else 2
    if args.json or args.command not in PRINT_THEIR_OWN:
        _print(result, args.json)
    return 1 if result.get("ok") is False else 0


if __name__ == "__main__":
    sys.exit(main())
