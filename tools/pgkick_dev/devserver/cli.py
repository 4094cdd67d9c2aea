"""`pgkick dev`: the app's local serverless stack in one long-running command.

It serves Lambda's Invoke API and EventBridge Scheduler's API on 127.0.0.1:3001,
runs the worker function's invocations in execution environments (AWS's Runtime
Interface Emulator running Lambda's runtime client, awslambdaric) with the app's
tasks (PGKICK_TASKS, the current folder on the path), streams their log lines,
and says in its banner which database it uses and which kindnesses are on.
Its flags, and the stack they describe, are pgkick_dev.devserver.flags; this
module starts and stops what they describe, in order.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgkick.connections.db import database_identity
from pgkick_dev.devserver.awake import report_line, start_monitor
from pgkick_dev.devserver.flags import add_arguments, build_stack, load_template
from pgkick_dev.devserver.stack import Stack
from pgkick_dev.local.autostart import DEFAULT_URL


def add_dev_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    add_arguments(command("dev", cmd_dev))


def _database(args: argparse.Namespace) -> tuple[str, str, Any]:
    """(dsn, what the banner says, the embedded server to stop or None)."""
    from pgkick.store import migrations
    from pgkick.store.migrations import MigrationStore

    if args.dsn or os.environ.get("DATABASE_URL"):
        named = (args.dsn, "--dsn") if args.dsn else (os.environ["DATABASE_URL"], "$DATABASE_URL")
        dsn, source = named
        _refuse_unmigrated(dsn, source)
        return dsn, source, None
    from pgkick_dev.embedded import EmbeddedPostgres

    folder = args.data_dir.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    server = EmbeddedPostgres(folder / "data")
    dsn = server.start()
    with MigrationStore.open(dsn) as store:
        migrations.migrate(store)
    said = f"embedded PostgreSQL 17 in {folder} (no --dsn, no $DATABASE_URL)"
    said += f"\nyour app: DATABASE_URL={dsn}"
    return dsn, said, server


def _refuse_unmigrated(dsn: str, source: str) -> None:
    """Stop before serving on a named database whose schema is missing or behind.

    Why: only the embedded database is migrated here (a named one is the app's, migrated by
    its own release step); served unmigrated, the banner looked healthy and the app's first
    enqueue, or the worker, failed with SchemaError. A server out of reach (a serverless
    database still resuming) or a role that may not read the ledger is left to the workers,
    as before: this check refuses only what it knows to be wrong."""
    import psycopg

    from pgkick.errors import PgkickError, SchemaError
    from pgkick.store import migrations
    from pgkick.store.migrations import MigrationStore

    try:
        with migrations.open_checked(MigrationStore, dsn, application_name="pgkick-dev"):
            pass
    except SchemaError as exc:
        flag = "--dsn ..." if source == "--dsn" else '--dsn "$DATABASE_URL"'
        raise SystemExit(
            f"pgkick dev: the database {source} names ({database_identity(dsn)}): {exc}; "
            f"`pgkick migrate {flag}` migrates it (without --dsn and $DATABASE_URL, `pgkick dev` "
            "starts an embedded database and migrates it itself)"
        ) from exc
    except (PgkickError, psycopg.Error):
        pass


def sync_periodic(stack: Stack, modules: tuple[str, ...]) -> list[str]:
    """The app's @pgkick.periodic declarations as recurring schedules, as `pgkick schedules
    sync` creates them on AWS (importing PGKICK_TASKS' modules runs the declarations)."""
    from pgkick.aws.schedules import desired
    from pgkick.tasks.recurring import periodic_registry
    from pgkick.tasks.registry import registry
    from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN

    registry.load(modules)
    worker = next(iter(stack.functions))
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{worker}"
    names = []
    for periodic in periodic_registry.declared.values():
        body = desired(periodic, arn, "arn:aws:iam::123456789012:role/pgkick-dev", LOCAL_DLQ_ARN)
        stack.scheduler.create(body.pop("Name"), body, replace=False)
        names.append(periodic.schedule_name)
    return names


def _watch(stack: Stack, root: Path, stop: threading.Event) -> None:
    """--reload: the app's .py files' modification times, looked at every second (files,
    never the database); a change retires every environment."""

    def snapshot() -> dict[Path, float]:
        found = {}
        for path in root.rglob("*.py"):
            if not any(part.startswith(".") for part in path.relative_to(root).parts):
                with contextlib.suppress(OSError):
                    found[path] = path.stat().st_mtime
        return found

    seen = snapshot()
    while not stop.wait(1.0):
        now = snapshot()
        if now != seen:
            changed = sorted(
                str(p.relative_to(root))
                for p in set(now) ^ set(seen) | {p for p in now if seen.get(p) != now[p]}
            )
            seen = now
            count = stack.reload()
            print(
                f"pgkick dev: {', '.join(changed)[:200]} changed: "
                f"{count} environment(s) restart on their next invocation",
                flush=True,
            )


def cmd_dev(args: argparse.Namespace) -> dict[str, Any]:
    """Run the app's local serverless stack: Lambda and Scheduler APIs on localhost."""
    from pgkick_dev.devserver.server import ServerThread, make_app

    if args.allowed_host and not args.host:
        raise SystemExit(
            "pgkick dev: --allowed-host names the server served with --host: give --host"
        )
    template = load_template(args)  # a setting AWS refuses at deploy: refused, nothing started
    sys.path.insert(0, os.getcwd())
    # stop as on Ctrl-C (environments, then PostgreSQL) when asked to, and when the
    # terminal it ran in is closed (SIGHUP), whose default left the embedded database running
    for name in ("SIGTERM", "SIGHUP"):  # SIGHUP: not on Windows
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _interrupt)
    from pgkick_dev.devserver import rie
    from pgkick_dev.devserver.ports import PortTaken, taken_by_another

    host = args.host or "127.0.0.1"
    if taken_by_another(host, args.port):  # before the database: nothing is started
        raise SystemExit(_port_taken(host, args.port))
    try:  # before the database: a refusal leaves nothing started
        emulator = rie.locate(say=lambda line: print(line, flush=True))
    except rie.RieMissing as exc:
        raise SystemExit(f"pgkick dev: {exc}") from exc
    dsn, source, embedded = _database(args)
    stack, lines = build_stack(args, dsn, template)
    monitor, said = start_monitor(dsn, embedded=embedded is not None, asked=args.awake_monitor)
    lines.append(said)
    said = f"environments: awslambdaric behind AWS's Runtime Interface Emulator, {emulator}"
    lines.insert(0, said)
    url = f"http://{host}:{args.port}"
    banner = {"url": url, "database": source, "lines": lines}
    try:
        from pgkick import config

        periodic = sync_periodic(stack, config.Settings.from_env().task_modules)
        lines.append(f"schedules from PGKICK_TASKS' @pgkick.periodic: {periodic or 'none'}")
    except Exception as exc:  # the app's modules fail to import: say so, serve anyway
        lines.append(f"PGKICK_TASKS did not import ({exc}): no periodic schedules")
    wildcard = host in ("0.0.0.0", "::", "localhost")
    stack.endpoint = f"http://{'127.0.0.1' if wildcard else host}:{args.port}"  # for the workers
    measured = monitor if embedded is not None else None  # a named database: the estimate
    app = make_app(
        stack,
        dsn=dsn,
        allow_remote=bool(args.host),
        banner=banner,
        awake=measured,
        host_names=[*([args.host] if args.host else []), *args.allowed_host],
    )
    stop = threading.Event()
    try:
        with ServerThread(app, host, args.port):
            print(
                f"pgkick dev: serving {url} (Lambda Invoke API, EventBridge Scheduler API, "
                "dashboard at /)",
                flush=True,
            )
            named = "" if embedded is not None else f" ({database_identity(dsn)})"
            print(f"database: {source}{named}", flush=True)  # which one, with no password
            for line in lines:
                print(line, flush=True)
            name = next(iter(stack.functions))
            found_at = "" if url == DEFAULT_URL else f" PGKICK_DEV_URL={url}"
            print(
                f"an app uses it with: PGKICK_KICKER=local{found_at} (or PGKICK_KICKER=lambda "
                f"PGKICK_WORKER_FUNCTION={name} AWS_ENDPOINT_URL_LAMBDA={url} "
                f"AWS_ENDPOINT_URL_SCHEDULER={url})",
                flush=True,
            )
            if args.reload:
                threading.Thread(target=_watch, args=(stack, Path.cwd(), stop), daemon=True).start()
            _serve(stack, args.exit_when_idle)
    except KeyboardInterrupt:
        pass
    except PortTaken:  # taken between the check above and the server's bind
        raise SystemExit(_port_taken(host, args.port)) from None
    finally:
        stop.set()
        stack.close()
        if monitor is not None:
            print(report_line(monitor), flush=True)
        if embedded is not None:
            embedded.stop()
    return {"stopped": True}


def _port_taken(host: str, port: int) -> str:
    return (
        f"pgkick dev: {host}:{port} is in use by another process (another `pgkick dev`?): "
        "stop it, or serve another port with --port N (an app with PGKICK_KICKER=local "
        "then finds it with PGKICK_DEV_URL=http://127.0.0.1:N)"
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _serve(stack: Stack, exit_when_idle: float | None) -> None:
    """Until Ctrl-C; or, started detached, until nothing was pending for `exit_when_idle` s."""
    idle_since = time.monotonic()
    while True:
        time.sleep(0.5)
        if exit_when_idle is None:
            continue
        with stack.lock:
            idle = stack.idle(include_schedules=True)
        if not idle:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > exit_when_idle:
            print("pgkick dev: nothing pending: stopping (started detached)", flush=True)
            return
