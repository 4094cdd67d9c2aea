"""`pgkick dev`'s flags, and the stack they describe with the app's SAM template.

Why apart from the command (pgkick_dev.devserver.cli, which starts the database, the
servers and the reload watcher): what the stand-in does is decided here, and the banner
says it. Each setting comes from its flag, else the app's template
(MaximumEventAgeInSeconds, MaximumRetryAttempts, RecursiveLoop, Timeout,
ReservedConcurrentExecutions), else pgkick's own (pgkick_dev.devserver.settings). Each
kindness (`--fast-scheduler`, `--no-freeze`, `--instant-throttle`) is a flag of its own,
named as one, and the banner says "KIND" when it is on and "faithful" when it is off;
faults are injected only on request (`--duplicate-rate`, `--drop-rate`,
`--schedule-throttle-rate`, `--schedule-delivery-failure-rate`), seeded by `--seed`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pgkick_dev.devserver.invocations import QueueOptions
from pgkick_dev.devserver.schedules import SchedulerFaults
from pgkick_dev.devserver.settings import read_template
from pgkick_dev.devserver.stack import REAPER_HANDLER, FunctionSpec, Stack

DEFAULT_PORT = 3001
DEFAULT_FUNCTION = "pgkick-worker"


def add_arguments(dev: argparse.ArgumentParser) -> None:
    """`pgkick dev`'s flags: the settings, the kindnesses, the faults."""
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
