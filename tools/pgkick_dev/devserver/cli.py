"""`pgkick dev`: the app's local serverless stack in one long-running command.

It serves Lambda's Invoke API and EventBridge Scheduler's API on 127.0.0.1:3001,
runs the worker function's invocations in execution environments (AWS's Runtime
Interface Emulator running Lambda's runtime client, awslambdaric) with the app's
tasks (PGKICK_TASKS, the current folder on the path), streams their log lines,
and says in its banner which database it uses and which kindnesses are on.
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

from pgkick_dev.devserver.awake import report_line, start_monitor
from pgkick_dev.devserver.invocations import QueueOptions
from pgkick_dev.devserver.schedules import SchedulerFaults
from pgkick_dev.devserver.settings import read_template
from pgkick_dev.devserver.stack import REAPER_HANDLER, FunctionSpec, Stack

DEFAULT_PORT = 3001
DEFAULT_FUNCTION = "pgkick-worker"


def add_dev_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    dev = command("dev", cmd_dev)
    add = dev.add_argument
    add("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    add("--host", help="serve this address and accept other machines (default: 127.0.0.1 only)")
    add(
        "--function",
        help="the worker function's name (default $PGKICK_WORKER_FUNCTION "
        f"or {DEFAULT_FUNCTION}); <name>-reaper is the reaper",
    )
    add("--template", type=Path, help="the SAM template to read (default ./template.yaml)")
    add("--concurrency", type=int, help="reserved concurrency (default: template, else 4)")
    add("--timeout", type=int, help="function timeout, seconds (default: template, else 300)")
    add("--max-event-age", type=int, help="MaximumEventAgeInSeconds (default: template)")
    add("--max-retries", type=int, choices=[0, 1, 2], help="MaximumRetryAttempts")
    add("--recursive-loop", choices=["Allow", "Terminate"], help="default: the template's")
    add("--reload", action="store_true", help="restart environments when a .py file changes")
    add("--data-dir", type=Path, default=Path(".pgkick"), help="embedded PostgreSQL's folder")
    add(
        "--awake-monitor",
        action="store_true",
        help="run the activity monitor on a named database too (its session keeps a "
        "serverless database awake); on the embedded one it always runs",
    )
    kind = dev.add_argument_group("kindnesses (each one makes the stand-in nicer than AWS)")
    kind.add_argument(
        "--fast-scheduler",
        action="store_true",
        help="fire schedules at the second, not within the minute",
    )
    kind.add_argument(
        "--no-freeze", action="store_true", help="leave environments running between invocations"
    )
    kind.add_argument(
        "--instant-throttle",
        action="store_true",
        help="run a throttled event the moment a slot frees (no backoff)",
    )
    faults = dev.add_argument_group("fault injection (as Lambda documents them)")
    faults.add_argument(
        "--duplicate-rate", type=float, default=0.0, help="share of events delivered twice (0-1)"
    )
    faults.add_argument(
        "--drop-rate", type=float, default=0.0, help="share of events lost silently (0-1)"
    )
    faults.add_argument(
        "--schedule-throttle-rate",
        type=float,
        default=0.0,
        help="share of CreateSchedule calls throttled (ThrottlingException, 0-1)",
    )
    faults.add_argument(
        "--schedule-delivery-failure-rate",
        type=float,
        default=0.0,
        help="share of schedule deliveries the worker refuses (retried, then dead-lettered)",
    )
    faults.add_argument("--seed", type=int, help="for the injected faults and the offsets")
    add("--exit-when-idle", type=float, help=argparse.SUPPRESS)  # the detached autostart


def _database(args: argparse.Namespace) -> tuple[str, str, Any]:
    """(dsn, what the banner says, the embedded server to stop or None)."""
    if args.dsn:
        return args.dsn, "--dsn", None
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"], "$DATABASE_URL", None
    from pgkick.store import migrations
    from pgkick.store.migrations import MigrationStore
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


def build_stack(args: argparse.Namespace, dsn: str) -> tuple[Stack, list[str]]:
    """The stack the flags and the template describe, and the banner's lines about it."""
    template = read_template(args.template or Path("template.yaml"))
    name = args.function or os.environ.get("PGKICK_WORKER_FUNCTION") or DEFAULT_FUNCTION
    name = name.split(":function:")[-1].split(":")[0]
    options = QueueOptions(
        max_retries=template.max_retries if args.max_retries is None else args.max_retries,
        max_event_age=args.max_event_age or template.max_event_age,
        allow_loops=(args.recursive_loop or ("Allow" if template.allow_loops else "")) == "Allow",
        instant_throttle=args.instant_throttle,
        duplicate_rate=args.duplicate_rate,
        drop_rate=args.drop_rate,
        seed=args.seed,
    )
    app_path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    env = {"DATABASE_URL": dsn, "PYTHONPATH": app_path}
    worker = FunctionSpec(
        name,
        timeout_ms=(args.timeout or template.timeout_s) * 1000,
        concurrency=args.concurrency or template.concurrency or 4,
        options=options,
    )
    reaper = FunctionSpec(
        f"{name.removesuffix('-worker')}-reaper",
        handler=REAPER_HANDLER,
        timeout_ms=120_000,
        concurrency=1,
        options=QueueOptions(max_retries=0, seed=args.seed),
    )
    stack = Stack(
        [worker, reaper],
        env=env,
        write_log=lambda line: print(line, flush=True),
        freeze=not args.no_freeze,
        fast_scheduler=args.fast_scheduler,
        seed=args.seed,
        scheduler_faults=SchedulerFaults(
            api_throttle_rate=args.schedule_throttle_rate,
            delivery_failure_rate=args.schedule_delivery_failure_rate,
        ),
    )
    o = options
    lines = [
        f"functions: {worker.name} (worker, cap {worker.concurrency}, timeout "
        f"{worker.timeout_ms // 1000} s), {reaper.name}",
        f"settings from {template.source}: MaximumEventAgeInSeconds {o.max_event_age}, "
        f"MaximumRetryAttempts {o.max_retries}, RecursiveLoop "
        f"{'Allow' if o.allow_loops else 'Terminate (cut after 16 hops)'}",
        "faithful: every event kept; retries after 1 and 2 min; throttles back off 1 s..5 min"
        if not o.instant_throttle
        else "KIND: a throttled event runs the moment a slot frees (--instant-throttle)",
        "KIND: schedules fire at the second (--fast-scheduler)"
        if args.fast_scheduler
        else "faithful: schedules fire within the minute (--fast-scheduler for the second)",
        "KIND: environments keep running between invocations (--no-freeze)"
        if args.no_freeze
        else "faithful: environments frozen (SIGSTOP) between invocations",
    ]
    if o.duplicate_rate or o.drop_rate:
        lines.append(f"faults: {o.duplicate_rate:.0%} delivered twice, {o.drop_rate:.0%} lost")
    if args.schedule_throttle_rate or args.schedule_delivery_failure_rate:
        lines.append(
            f"faults: {args.schedule_throttle_rate:.0%} of CreateSchedule throttled, "
            f"{args.schedule_delivery_failure_rate:.0%} of schedule deliveries refused"
        )
    lines.append(
        "faithful: schedules retried under their RetryPolicy, then dead-lettered; no SQS "
        "here: dead letters go to the worker as SQS events, 10 a batch"
    )
    return stack, lines


def sync_periodic(stack: Stack, modules: tuple[str, ...]) -> list[str]:
    """The app's @pgkick.periodic declarations as recurring schedules, as `pgkick schedules
    sync` creates them on AWS (importing PGKICK_TASKS' modules runs the declarations)."""
    from pgkick.aws.schedules import desired
    from pgkick.tasks.recurring import periodic_registry
    from pgkick.tasks.registry import registry

    registry.load(modules)
    worker = next(iter(stack.functions))
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{worker}"
    names = []
    for periodic in periodic_registry.declared.values():
        body = desired(periodic, arn, "arn:aws:iam::123456789012:role/pgkick-dev")
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

    sys.path.insert(0, os.getcwd())
    signal.signal(signal.SIGTERM, _interrupt)  # stop as on Ctrl-C: environments, then PostgreSQL
    from pgkick_dev.devserver import rie

    try:  # before the database: a refusal leaves nothing started
        emulator = rie.locate(say=lambda line: print(line, flush=True))
    except rie.RieMissing as exc:
        raise SystemExit(f"pgkick dev: {exc}") from exc
    dsn, source, embedded = _database(args)
    stack, lines = build_stack(args, dsn)
    monitor, said = start_monitor(dsn, embedded=embedded is not None, asked=args.awake_monitor)
    lines.append(said)
    said = f"environments: awslambdaric behind AWS's Runtime Interface Emulator, {emulator}"
    lines.insert(0, said)
    host = args.host or "127.0.0.1"
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
    app = make_app(stack, dsn=dsn, allow_remote=bool(args.host), banner=banner, awake=measured)
    stop = threading.Event()
    try:
        with ServerThread(app, host, args.port):
            print(
                f"pgkick dev: serving {url} (Lambda Invoke API, EventBridge Scheduler API, "
                "dashboard at /)",
                flush=True,
            )
            print(f"database: {source}", flush=True)
            for line in lines:
                print(line, flush=True)
            name = next(iter(stack.functions))
            print(
                "an app uses it with: PGKICK_KICKER=local (or PGKICK_KICKER=lambda "
                f"PGKICK_WORKER_FUNCTION={name} AWS_ENDPOINT_URL_LAMBDA={url} "
                f"AWS_ENDPOINT_URL_SCHEDULER={url})",
                flush=True,
            )
            if args.reload:
                threading.Thread(target=_watch, args=(stack, Path.cwd(), stop), daemon=True).start()
            _serve(stack, args.exit_when_idle)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        stack.close()
        if monitor is not None:
            print(report_line(monitor), flush=True)
        if embedded is not None:
            embedded.stop()
    return {"stopped": True}


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
