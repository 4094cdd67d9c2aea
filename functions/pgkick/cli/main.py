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
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points
from typing import Any, NoReturn

from pgkick import config
from pgkick.aws.schedules import add_schedule_commands
from pgkick.cli import database
from pgkick.cli.flow_commands import add_flow_commands
from pgkick.cli.inspect import add_inspect_commands
from pgkick.cli.output import (
    INTERRUPTED,
    INTERRUPTED_EXIT,
    failed,
    print_result,
    summary,
    tooling_missing,
    versions,
)
from pgkick.cli.queue_commands import add_queue_commands
from pgkick.cli.types import json_payload, number, schema_name, wait_seconds, whole
from pgkick.cli.workflow import add_workflow_command
from pgkick.connections.db import DatabaseError
from pgkick.errors import (
    Interrupted,
    JobFailed,
    JobNotFound,
    JobRetried,
    PgkickError,
    UsageError,
)
from pgkick.kick.default import default_kicker
from pgkick.producer import after_commit
from pgkick.producer import enqueue as producer
from pgkick.store import migrations as schema
from pgkick.store.operator import OperatorStore
from pgkick.tasks import results
from pgkick.tasks.registry import registry
from pgkick.validation import check_name

Handler = Callable[[argparse.Namespace], dict[str, Any]]
PRINT_THEIR_OWN = ("demo", "bench", "jobs", "job", "workflow")  # a report or a table, unless --json


LOCAL_WAIT = 60.0  # seconds `pgkick enqueue` waits for its job by default with PGKICK_KICKER=local


def _local_wait(kicker: object, run_at: datetime) -> float:
    """A development kicker (the local stack's: it says so with `runs_jobs_nearby = True`)
    runs the job within seconds: wait for it by default, so the command shows how it ended;
    a production kicker's worker may be far. Only for a job due now: a delayed or debounced
    one would hold the command for its delay (a shell's burst of `--debounce` enqueues, one
    after the other, could never collapse)."""
    if not getattr(kicker, "runs_jobs_nearby", False):
        return 0.0
    return LOCAL_WAIT if run_at <= datetime.now(UTC) + timedelta(seconds=1) else 0.0


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
    payload = json_payload(args.payload)
    if config.task_modules():  # the app's tasks known: a misspelt TASK is refused, unwritten
        registry.load(config.task_modules())
        registry.check_known(check_name("task", args.task))
    kicker = default_kicker()
    # one connection: schema checked, then the insert (autocommitted)
    with database.operator_store(args) as store:
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
            rate_key=args.rate_key,
            debounce=args.debounce,
            max_delay=args.max_delay,
            throttle=args.throttle,
        )
        # Committed: from here nothing may fail the command (a retry would enqueue twice).
        after_commit.kick_committed(enqueuer.queued, kicker, lambda: contextlib.nullcontext(store))
        if not enqueuer.queued:  # a live job holds its unique key: nothing was written
            return {"id": job_id, "duplicate": True}
        (job,) = enqueuer.queued  # what the insert returned: pgkick_producer may read only this
        result = {"id": job_id, "queue": job.queue, "run_at": job.run_at.isoformat()}
        wait = args.wait if args.wait is not None else _local_wait(kicker, job.run_at)
        try:  # lets the job run before we answer
            row = _run_ended(store, job_id, wait)
        except DatabaseError:  # a producer role may not read status: leave it out
            return result
        if row is None:  # gone already (purged): nothing more to say
            return result
        result["status"] = row["status"]
    error = f"{row['last_error'] or 'no error recorded'}"
    seeing = f"see `pgkick job {job_id}`"
    if row["status"] == "failed":  # it ran while we waited, and failed: say why, exit non-zero
        raise JobFailed(
            job_id, f"{error} (after {row['attempts']} of {row['max_attempts']} attempts; {seeing})"
        )
    if _retried(row):  # a run failed and a retry waits its backoff: said now, not after it
        at = row["run_at"].astimezone(UTC).strftime("%H:%M:%S UTC")
        raise JobRetried(job_id, f"{error} ({seeing})", row["attempts"], row["max_attempts"], at)
    return result


def _run_ended(store: OperatorStore, job_id: int, timeout: float) -> dict[str, Any] | None:
    """The job's row once a run of it has ended (done, failed, or queued again after a
    failed attempt), or as it is after `timeout` seconds (None: gone), looked at on the
    command's own connection at `results.wait`'s cadence."""
    rows, _ = results.looked_until(
        lambda: store.get_many([job_id]),
        lambda rows: not rows or rows[0]["status"] in ("done", "failed") or _retried(rows[0]),
        timeout,
    )
    return rows[0] if rows else None


def _retried(row: dict[str, Any]) -> bool:
    """Queued again after a failed attempt (a task that raised, a lost lease)."""
    return row["status"] == "queued" and row["attempts"] > 0 and row["last_error"] is not None


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusals are one line as every other error of the command
    (argparse printed its usage block first): the command, the problem, where to read more."""

    refused = ""  # the last refusal (on the class: a subcommand's parser sets it), for --json

    def error(self, message: str) -> NoReturn:
        _Parser.refused = f"{message} (see `{self.prog} --help`)"
        self.exit(2, f"{self.prog}: {_Parser.refused}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pgkick", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=versions())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Handler) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary(handler.__doc__), description=handler.__doc__)
        sub.add_argument("--dsn", help="PostgreSQL connection string (default: $DATABASE_URL)")
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        sub.set_defaults(handler=handler)
        return sub

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
    enqueue.add_argument("--delay", type=number, help="seconds before the job is due")
    enqueue.add_argument(  # validated by the producer
        "--max-attempts", type=whole, default=5, help="attempts before it fails for good (5)"
    )
    enqueue.add_argument("--priority", type=whole, default=0, help="-100..100, higher first")
    enqueue.add_argument("--group", help="jobs of one group run one at a time")
    enqueue.add_argument("--unique-key", help="skip if a queued or running job has this key")
    enqueue.add_argument(  # validated by the producer (docs/guide/flow-control.md)
        "--rate-key", help="the key whose starts the queue's rate counts (pgkick limit --rate)"
    )
    for flag, what in (  # validated by the producer (docs/guide/debounce.md)
        ("--debounce", "seconds of quiet: the key's queued job takes this payload, runs later"),
        ("--max-delay", "with --debounce: at most this many seconds after the first"),
        ("--throttle", "seconds: the key's first job in the period is kept"),
    ):
        enqueue.add_argument(flag, type=number, help=what)
    enqueue.add_argument(
        "--wait",
        type=wait_seconds,
        default=None,
        help="seconds to wait for the job to finish, then exit 1 if it failed (0: don't; "
        f"default: {LOCAL_WAIT:g} with the local kicker, else 0)",
    )
    acting = [*add_queue_commands(command), *add_flow_commands(command)]
    inspect = [*add_inspect_commands(command), add_workflow_command(command)]
    for sub in (migrate, enqueue, *acting, *inspect):
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
    """Run one command; its exit status. A reader that left (`pgkick jobs | head`) ends the
    output quietly, as Python's own documentation advises (SIGPIPE is ignored in Python)."""
    try:
        code = _run(argv)
        sys.stdout.flush()  # inside: a closed pipe raises here, not at the interpreter's exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


def _run(argv: Sequence[str] | None) -> int:
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
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(words)
    except SystemExit as exited:  # a refusal (2), or --help and --version (0)
        if exited.code == 2 and "--json" in words:  # one JSON document, a refusal too
            print(json.dumps({"error": _Parser.refused}))
        raise
    try:
        # --schema reaches every layer, and the workers a local kicker starts, for the
        # command's duration (pgkick.config.overriding: os.environ is never written)
        with config.overriding(
            schema=getattr(args, "schema", None), database_url=getattr(args, "dsn", None)
        ):
            result = args.handler(args)
    except KeyboardInterrupt:  # before a bulk action's first batch, or a migrate's commit
        return failed(args, Interrupted(INTERRUPTED), INTERRUPTED_EXIT)
    except (
        PgkickError,
        TimeoutError,
        ValueError,
        TypeError,
        DatabaseError,
    ) as exc:
        if isinstance(exc, Interrupted):  # a bulk action's: it says how far it got
            return failed(args, exc, INTERRUPTED_EXIT)
        refused = database.role_refused(args.command, exc)  # with the role to connect as
        if refused is not None:
            return failed(args, refused, 2)
        return failed(args, exc, 1 if isinstance(exc, UsageError | JobFailed | JobNotFound) else 2)
    if args.json or args.command not in PRINT_THEIR_OWN:
        print_result(result, args.json)
    return 1 if result.get("ok") is False else 0


if __name__ == "__main__":
    sys.exit(main())
