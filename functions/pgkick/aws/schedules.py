"""`pgkick schedules sync`: make the scheduler's recurring schedules match the declarations.

Why a sync and not one schedule per deploy step: declarations live in code and
change with it; a sync run after each deploy creates what is new, updates what
changed and deletes what was removed, and running it twice changes nothing.
It owns only schedules named `pgkick.periodic.*` in its group: the worker's
one-time wake-ups and rescues (`pgkick-...`) and anyone else's are never touched.
Every declaration is validated before the first call, with the check `@pgkick.periodic`
and the local stack use (pgkick.tasks.expressions).

Why it refuses to read nothing: no declarations look the same as "delete every periodic
schedule". A sync run where PGKICK_TASKS is unset (an operator's shell, a CI job missing
one variable) would silently stop the app's cron jobs, so no task modules is an error, and
modules that declare nothing while schedules exist delete them only with `--prune-all`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pgkick.aws.failures import one_line
from pgkick.errors import ConfigError
from pgkick.kick.kickers import RETRY_POLICY
from pgkick.tasks.recurring import SCHEDULE_PREFIX, Periodic

# What Scheduler does with a tick it cannot deliver (the worker throttled, a permission
# missing). With a dead-letter queue (PGKICK_SCHEDULE_DLQ_ARN, the template's
# FailedKicksQueue, whose handler runs a dead-lettered tick: pgkick.aws.failed_kicks),
# the wake-ups' policy: an hour of retries, then the queue. Without one, AWS's own default
# (185 attempts over 24 h), written out so that a sync compares it: nothing would catch a
# tick given up sooner.
DEFAULT_RETRY_POLICY = {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185}


def desired(
    periodic: Periodic, target_arn: str, role_arn: str, dead_letter_arn: str | None = None
) -> dict[str, Any]:
    """The schedule's fields as create_schedule/update_schedule take them."""
    target: dict[str, Any] = {
        "Arn": target_arn,
        "RoleArn": role_arn,
        "Input": json.dumps(periodic.event(), sort_keys=True),
        "RetryPolicy": dict(RETRY_POLICY if dead_letter_arn else DEFAULT_RETRY_POLICY),
    }
    if dead_letter_arn:
        target["DeadLetterConfig"] = {"Arn": dead_letter_arn}
    return {
        "Name": periodic.schedule_name,
        "ScheduleExpression": periodic.expression,
        "ScheduleExpressionTimezone": periodic.timezone,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "State": "ENABLED",
        "Target": target,
    }


def _current(client: Any, group: str) -> dict[str, dict[str, Any]]:
    """The schedules this sync owns, with the fields it compares."""
    owned: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"GroupName": group, "NamePrefix": SCHEDULE_PREFIX}
    while True:
        page = client.list_schedules(**kwargs)
        for summary in page.get("Schedules", []):
            name = summary["Name"]
            if name.startswith(SCHEDULE_PREFIX):  # NamePrefix is a filter; trust only this
                owned[name] = client.get_schedule(Name=name, GroupName=group)
        if not page.get("NextToken"):
            return owned
        kwargs["NextToken"] = page["NextToken"]


def _same(want: dict[str, Any], have: dict[str, Any]) -> bool:
    """Whether `have` already does what `want` says (a RetryPolicy or DeadLetterConfig left
    out reads as AWS's default and none: a schedule synced before them is updated). The
    window too: a schedule edited to FLEXIBLE by hand fires its ticks up to that many
    minutes late, and sync owns these schedules whole (want's Mode is always OFF)."""
    target = have.get("Target", {})
    window = (have.get("FlexibleTimeWindow") or {}).get("Mode", "OFF")
    retry = {**DEFAULT_RETRY_POLICY, **(target.get("RetryPolicy") or {})}
    dead_letter = (target.get("DeadLetterConfig") or {}).get("Arn")
    return bool(
        have.get("ScheduleExpression") == want["ScheduleExpression"]
        and have.get("ScheduleExpressionTimezone") == want["ScheduleExpressionTimezone"]
        and have.get("State", "ENABLED") == want["State"]
        and window == want["FlexibleTimeWindow"]["Mode"]
        and target.get("Arn") == want["Target"]["Arn"]
        and target.get("RoleArn") == want["Target"]["RoleArn"]
        and target.get("Input") == want["Target"]["Input"]
        and retry == want["Target"]["RetryPolicy"]
        and dead_letter == want["Target"].get("DeadLetterConfig", {}).get("Arn")
    )


def sync(
    client: Any,
    declarations: Iterable[Periodic],
    *,
    target_arn: str,
    role_arn: str,
    group: str = "default",
    dry_run: bool = False,
    prune_all: bool = False,
    dead_letter_arn: str | None = None,
) -> dict[str, list[str]]:
    """Create, update and delete owned schedules; returns the names in each list. With no
    declaration at all, deletes the owned schedules only when `prune_all` says so."""
    if not target_arn or not role_arn:
        raise ConfigError(
            "schedules sync needs the worker's ARN and the scheduler's role ARN "
            "(PGKICK_WORKER_ARN, PGKICK_SCHEDULER_ROLE_ARN)"
        )
    # Checked again here, every one before the first call: a Periodic built by hand (not
    # declared) must not reach AWS either (pgkick.tasks.expressions, the one check).
    checked = [periodic.check() for periodic in declarations]
    wanted = {p.schedule_name: desired(p, target_arn, role_arn, dead_letter_arn) for p in checked}
    have = _current(client, group)
    if not wanted and have and not prune_all:
        raise ConfigError(
            f"schedules sync: the task modules declare no @pgkick.periodic, and {len(have)} "
            f"periodic schedule(s) exist in group {group!r} ({', '.join(sorted(have))}); "
            "nothing was changed. Check that PGKICK_TASKS names the modules that declare "
            "them; if the app has no periodic task any more, run it again with --prune-all "
            "to delete them all"
        )
    plan: dict[str, list[str]] = {"created": [], "updated": [], "deleted": [], "unchanged": []}
    for name, want in sorted(wanted.items()):
        if name not in have:
            plan["created"].append(name)
            if not dry_run:
                client.create_schedule(GroupName=group, **want)
        elif not _same(want, have[name]):
            plan["updated"].append(name)
            if not dry_run:
                client.update_schedule(GroupName=group, **want)
        else:
            plan["unchanged"].append(name)
    for name in sorted(set(have) - set(wanted)):
        plan["deleted"].append(name)
        if not dry_run:
            client.delete_schedule(Name=name, GroupName=group)
    return plan


def cmd_schedules(args: Any) -> dict[str, Any]:
    """Make the scheduler's recurring schedules match the @pgkick.periodic declarations in
    PGKICK_TASKS' modules: create, update, delete (only `pgkick.periodic.*`); idempotent."""

    from pgkick import config
    from pgkick.awsapi.boto import aws_client
    from pgkick.tasks.recurring import periodic_registry
    from pgkick.tasks.registry import registry

    settings = config.Settings.from_env()
    if not settings.task_modules:  # read as "declares nothing", every schedule would go
        raise ConfigError(
            "schedules sync: no task modules to read the @pgkick.periodic declarations from; "
            "set PGKICK_TASKS to the modules that declare them (PGKICK_TASKS=myapp.tasks). "
            "Nothing was changed"
        )
    registry.load(settings.task_modules)  # their @periodic declarations run (and are checked)
    with one_line("scheduler"):  # no botocore traceback: one line saying what to do
        return sync(
            aws_client("scheduler", 5.0),
            periodic_registry.declared.values(),
            target_arn=settings.worker_arn or "",
            role_arn=settings.scheduler_role_arn or "",
            group=settings.schedule_group,
            dry_run=args.dry_run,
            prune_all=args.prune_all,
            dead_letter_arn=settings.schedule_dlq_arn,
        )


def add_schedule_commands(command: Any) -> None:
    """`pgkick schedules sync [--dry-run] [--prune-all]` (registered by pgkick.cli.main)."""
    sub = command("schedules", cmd_schedules)
    sub.add_argument("action", choices=["sync"], help="sync: make AWS match the code")
    sub.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    sub.add_argument(
        "--prune-all",
        action="store_true",
        help="when the task modules declare no periodic task, delete every pgkick.periodic.* "
        "schedule (refused without it: an empty PGKICK_TASKS module is more often a mistake)",
    )
