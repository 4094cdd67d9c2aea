"""`pgkick dev`'s flags, and the stack they describe with the app's SAM template.

Why apart from the command (pgkick_dev.devserver.cli, which starts the database, the
servers and the reload watcher): what the stand-in does is decided here, and the banner
says it. Each setting comes from its flag, else the app's template
(MaximumEventAgeInSeconds, MaximumRetryAttempts, RecursiveLoop, Timeout, MemorySize,
ReservedConcurrentExecutions), else pgkick's own (pgkick_dev.devserver.settings); a value
AWS's deploy refuses, from a flag or the template, is refused in AWS's words before
anything starts, and 0 is a value, never "unset" (reserved concurrency 0 throttles
every invocation, as on AWS). Each
kindness (`--fast-scheduler`, `--no-freeze`, `--instant-throttle`) is a flag of its own,
named as one, and the banner says "KIND" when it is on and "faithful" when it is off;
faults are injected only on request (`--duplicate-rate`, `--drop-rate`,
`--schedule-throttle-rate`, `--schedule-delivery-failure-rate`), seeded by `--seed`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from pgkick_dev.devserver import parameters
from pgkick_dev.devserver.invocations import QueueOptions
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN
from pgkick_dev.devserver.schedules import SchedulerFaults
from pgkick_dev.devserver.settings import (
    SettingRefused,
    TemplateSettings,
    read_template,
    refusal,
)
from pgkick_dev.devserver.stack import REAPER_HANDLER, FunctionSpec, Stack

DEFAULT_PORT = 3001
DEFAULT_FUNCTION = "pgkick-worker"
LOCAL_CAP = 4  # environments at once when the template reserves none (the account's pool)


def aws_setting(setting: str) -> Callable[[str], int]:
    """An argparse type: a whole number within AWS's range for `setting`, refused in the
    words of AWS's own validation error otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        said = refusal(setting, value)
        if said is not None:
            raise argparse.ArgumentTypeError(f"{setting}: {said}")
        return value

    parse.__name__ = setting  # argparse names the type in its own errors
    return parse


def add_arguments(dev: argparse.ArgumentParser) -> None:
    """`pgkick dev`'s flags: the settings, the kindnesses, the faults."""
    add = dev.add_argument
    add("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    add("--host", help="serve this address and accept other machines (default: 127.0.0.1 only)")
    add(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --host: a host name the server is reached by (repeatable); a request "
        "naming another (DNS rebinding) is refused",
    )
    add(
        "--function",
        help="the worker function's name (default $PGKICK_WORKER_FUNCTION "
        f"or {DEFAULT_FUNCTION}); <name>-reaper is the reaper",
    )
    add("--template", type=Path, help="the SAM template to read (default ./template.yaml)")
    add(
        "--parameter-overrides",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="the template's parameter values, as `sam deploy` takes them (after samconfig.toml's "
        "parameter_overrides beside the template; the others: their Defaults)",
    )
    add(
        "--concurrency",
        type=aws_setting("ReservedConcurrentExecutions"),
        help=f"reserved concurrency; 0 throttles every invocation, as on AWS (default: "
        f"template, else {LOCAL_CAP})",
    )
    add(
        "--timeout",
        type=aws_setting("Timeout"),
        help="function timeout, 1-900 seconds (default: template, else 300)",
    )
    add(
        "--memory-size",
        type=aws_setting("MemorySize"),
        help="MemorySize, 128-10240 MB: a runtime past it is killed (default: template, else 512)",
    )
    add(
        "--max-event-age",
        type=aws_setting("MaximumEventAgeInSeconds"),
        help="MaximumEventAgeInSeconds, 60-21600 (default: template)",
    )
    add(
        "--max-retries",
        type=aws_setting("MaximumRetryAttempts"),
        help="MaximumRetryAttempts, 0-2 (default: template)",
    )
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


def load_template(args: argparse.Namespace) -> TemplateSettings:
    """The app's template's settings; SystemExit in AWS's words for one its deploy refuses
    (called before anything starts)."""
    path = args.template or Path("template.yaml")
    try:
        samconfig = path.parent / "samconfig.toml"
        values = parameters.from_samconfig(samconfig)
        values.update(parameters.parse(args.parameter_overrides, "--parameter-overrides"))
        return read_template(path, values, parameters.stack_name(samconfig))
    except (SettingRefused, parameters.ParameterRefused) as exc:
        raise SystemExit(f"pgkick dev: {path}: {exc} (AWS refuses it at deploy)") from None


def _cap(args: argparse.Namespace, template: TemplateSettings) -> tuple[int, str, bool]:
    """The worker's concurrency cap, the banner's word on where it came from, and whether
    it is a reservation (else the local default, standing for the account's pool)."""
    if args.concurrency is not None:
        return args.concurrency, "--concurrency", True
    if template.concurrency is not None:
        return template.concurrency, "ReservedConcurrentExecutions", True
    if template.concurrency_unknown:
        return (
            LOCAL_CAP,
            (
                f"ReservedConcurrentExecutions unknown: {template.concurrency_unknown}; "
                "the local default, --concurrency to set it"
            ),
            False,
        )
    return LOCAL_CAP, "no reservation: the local default", False


def build_stack(
    args: argparse.Namespace, dsn: str, template: TemplateSettings | None = None
) -> tuple[Stack, list[str]]:
    """The stack the flags and the template describe, and the banner's lines about it."""
    template = template or load_template(args)
    name = args.function or os.environ.get("PGKICK_WORKER_FUNCTION") or DEFAULT_FUNCTION
    name = name.split(":function:")[-1].split(":")[0]
    options = QueueOptions(
        max_retries=template.max_retries if args.max_retries is None else args.max_retries,
        max_event_age=template.max_event_age if args.max_event_age is None else args.max_event_age,
        allow_loops=(args.recursive_loop or ("Allow" if template.allow_loops else "")) == "Allow",
        instant_throttle=args.instant_throttle,
        duplicate_rate=args.duplicate_rate,
        drop_rate=args.drop_rate,
        seed=args.seed,
    )
    app_path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    env = {"DATABASE_URL": dsn, "PYTHONPATH": app_path}
    cap, cap_source, reserved = _cap(args, template)
    timeout_s = template.timeout_s if args.timeout is None else args.timeout
    worker = FunctionSpec(
        name,
        timeout_ms=timeout_s * 1000,
        concurrency=cap,
        reserved=reserved,
        memory_mb=template.memory_mb if args.memory_size is None else args.memory_size,
        aliases=template.aliases,
        # the template's OnFailure queue (FailedKicksQueue) is the one the worker drains
        on_failure=LOCAL_DLQ_ARN if template.on_failure else None,
        drains=LOCAL_DLQ_ARN,
        drain_batch=template.drain_batch,
        drain_visibility=template.drain_visibility,
        drain_retention=template.drain_retention,
        options=options,
        env=template.log_env,  # AWS_LAMBDA_LOG_LEVEL/FORMAT, as Lambda sets them
    )
    reaper = FunctionSpec(
        f"{name.removesuffix('-worker')}-reaper",
        handler=REAPER_HANDLER,
        timeout_ms=120_000,
        concurrency=1,
        on_failure=LOCAL_DLQ_ARN if template.reaper_on_failure else None,
        options=QueueOptions(max_retries=0, seed=args.seed),
        env=template.reaper_log_env,
    )
    stack = Stack(
        [worker, reaper],
        env=env,
        write_log=lambda line: print(line, flush=True),
        freeze=not args.no_freeze,
        fast_scheduler=args.fast_scheduler,
        seed=args.seed,
        schedule_group=template.schedule_group,
        schedule_groups=template.schedule_groups,
        scheduler_faults=SchedulerFaults(
            api_throttle_rate=args.schedule_throttle_rate,
            delivery_failure_rate=args.schedule_delivery_failure_rate,
        ),
    )
    o = options
    lines = [
        f"functions: {worker.name} (worker, cap {worker.concurrency} ({cap_source}), timeout "
        f"{worker.timeout_ms // 1000} s, MemorySize {worker.memory_mb} MB), {reaper.name}",
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
        "faithful: schedules retried under their RetryPolicy, then dead-lettered; dead letters "
        "and failed kicks onto FailedKicksQueue, drained by the worker "
        f"{worker.drain_batch} a batch, a failed record back after {worker.drain_visibility} s "
        f"(until {worker.drain_retention // 86400} d); wake-ups in schedule group "
        f"{template.schedule_group}"
    )
    return stack, lines
