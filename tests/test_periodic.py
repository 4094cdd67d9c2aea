"""Periodic tasks: declarations checked before anything is created, `pgkick schedules sync`
against moto's EventBridge Scheduler (create, update, delete only its own, idempotent), and
exactly one job per tick however often the scheduler delivers it (racing connections).
Each test names the break it catches; each break was applied by hand and seen to fail."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from pgkick import cli
from pgkick.aws.schedules import desired, sync
from pgkick.config import Settings
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.recurring import SCHEDULED_TIME, PeriodicRegistry, declare, periodic_registry
from pgkick.tasks.registry import Registry
from pgkick.worker.runtime import Runtime
from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import job_row, load_handler, sessions_of, wait_for_lock_waiters
from tests.spies import WAIT
from tests.store import JobStore

WORKER = "arn:aws:lambda:us-east-1:123456789012:function:pgkick-worker"
ROLE = "arn:aws:iam::123456789012:role/pgkick-scheduler"
TICK = "2026-11-30T03:00:00Z"


@pytest.mark.parametrize(
    ("expression", "timezone", "message"),
    [
        ("cron(0 3 * * *)", "UTC", "has 5 fields; EventBridge cron has 6"),
        ("cron(0 3 * * * *)", "UTC", "exactly one of day-of-month and day-of-week must be '?'"),
        ("cron(0 3 ? * ? *)", "UTC", "exactly one of day-of-month and day-of-week must be '?'"),
        ("cron(0 3$ * * ? *)", "UTC", "hours field '3$' is not valid"),
        ("0 3 * * ?", "UTC", "is neither cron("),
        ("rate(5 minute)", "UTC", "use rate(1 minute) or rate(N minutes)"),
        ("rate(1 hours)", "UTC", "use rate(1 hour) or rate(N hours)"),
        ("rate(0 minutes)", "UTC", "use rate(1 minute)"),
        ("rate(5 weeks)", "UTC", "is neither cron("),
        ("cron(0 3 * * ? *)", "Mars/Olympus_Mons", "'Mars/Olympus_Mons' is not an IANA time zone"),
        ("cron(0 3 * * ? *)", "../etc/passwd", "is not an IANA time zone"),
    ],
)
def test_bad_expressions_and_timezones_are_refused_naming_the_problem(
    expression: str, timezone: str, message: str
) -> None:
    """Catches: a schedule the scheduler would refuse (or read differently) getting as far
    as a sync, and a declaration recorded before its check failed."""
    into = PeriodicRegistry()
    with pytest.raises(ValueError, match=re.escape(message)):
        declare(expression, task="nightly", timezone=timezone, into=into)
    assert into.declared == {}


def test_good_expressions_pass() -> None:
    """Catches: checks so strict the scheduler's own examples are refused."""
    into = PeriodicRegistry()
    for n, expression in enumerate(
        ["cron(0 3 * * ? *)", "cron(0/15 8-17 ? * MON-FRI *)", "cron(0 12 L * ? 2026-2030)",
         "rate(1 minute)", "rate(5 minutes)", "rate(1 day)"]
    ):  # fmt: skip
        declare(expression, task="t", name=f"p{n}", timezone="Europe/Paris", into=into)
    assert len(into.declared) == 6


@pytest.fixture
def scheduler(aws: None) -> Any:
    return boto3.client("scheduler", region_name="us-east-1")


def names(client: Any) -> list[str]:
    return sorted(s["Name"] for s in client.list_schedules(GroupName="default")["Schedules"])


def test_sync_creates_updates_and_deletes_only_its_own_schedules_idempotently(
    scheduler: Any,
) -> None:
    """Catches: a sync that re-creates what exists (ConflictException on the second run)
    or updates what did not change, one that misses a changed expression or time zone,
    and one that deletes schedules it does not own (a worker's one-time wake-up, a
    rescue, someone else's)."""
    for foreign in ("pgkick-default-1a2b3c4d-20261130T0300", "pgkick-rescue-x", "backup"):
        scheduler.create_schedule(
            Name=foreign,
            ScheduleExpression="rate(1 day)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": WORKER, "RoleArn": ROLE},
        )
    into = PeriodicRegistry()
    declare("cron(0 3 * * ? *)", task="nightly", timezone="Europe/Paris", into=into)
    declare("rate(5 minutes)", task="poll", queue="feeds", into=into)

    def run() -> dict[str, list[str]]:
        return sync(scheduler, into.declared.values(), target_arn=WORKER, role_arn=ROLE)

    assert run()["created"] == ["pgkick.periodic.nightly", "pgkick.periodic.poll"]
    nightly = scheduler.get_schedule(Name="pgkick.periodic.nightly", GroupName="default")
    assert nightly["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert json.loads(nightly["Target"]["Input"]) == {"periodic": "nightly", "tick": SCHEDULED_TIME}
    assert run() == {
        "created": [],
        "updated": [],
        "deleted": [],
        "unchanged": ["pgkick.periodic.nightly", "pgkick.periodic.poll"],
    }

    changed = PeriodicRegistry()
    declare("cron(30 3 * * ? *)", task="nightly", timezone="Europe/Paris", into=changed)
    into = changed  # poll removed from the code, nightly moved to 03:30
    assert run() == {
        "created": [],
        "updated": ["pgkick.periodic.nightly"],
        "deleted": ["pgkick.periodic.poll"],
        "unchanged": [],
    }
    got = scheduler.get_schedule(Name="pgkick.periodic.nightly", GroupName="default")
    assert got["ScheduleExpression"] == "cron(30 3 * * ? *)"
    assert names(scheduler) == [
        "backup",
        "pgkick-default-1a2b3c4d-20261130T0300",
        "pgkick-rescue-x",
        "pgkick.periodic.nightly",
    ]


def test_a_bad_declaration_in_the_task_modules_fails_the_sync_before_any_schedule(
    scheduler: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches: a sync that creates the good schedules and then meets the bad one (the
    checks run at declaration, when PGKICK_TASKS' modules are imported, before any call)."""
    (tmp_path / "jobs_good_bad.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('rate(5 minutes)', task='fine_tick')\n"
        "def fine(payload): ...\n\n"
        "@pgkick.periodic('cron(0 3 * * ? *)', task='bad_tick', timezone='Europe/Pariss')\n"
        "def bad(payload): ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PGKICK_TASKS", "jobs_good_bad")
    monkeypatch.setenv("PGKICK_WORKER_ARN", WORKER)
    monkeypatch.setenv("PGKICK_SCHEDULER_ROLE_ARN", ROLE)
    try:
        code = cli.main(["schedules", "sync"])
    finally:
        sys.modules.pop("jobs_good_bad", None)
        periodic_registry.declared.pop("fine_tick", None)
    err = capsys.readouterr().err
    assert code == 2 and "timezone: 'Europe/Pariss' is not an IANA time zone name" in err
    assert names(scheduler) == []


def test_sync_gives_each_schedule_the_dead_letter_queue_and_updates_those_synced_before(
    scheduler: Any,
) -> None:
    """Catches (review 59, F5): periodic schedules made with no DeadLetterConfig (a tick
    Scheduler cannot deliver was dropped after its retries, though FailedKicksQueue would
    run it), and a sync that does not compare it (a schedule synced before would never
    get one). The RetryPolicy is the wake-ups': an hour, then the dead-letter queue."""
    into = PeriodicRegistry()
    declare("cron(0 3 * * ? *)", task="nightly", timezone="Europe/Paris", into=into)
    dlq = "arn:aws:sqs:us-east-1:123456789012:pgkick-failed-kicks"

    def run(dead_letter_arn: str | None) -> dict[str, list[str]]:
        return sync(
            scheduler,
            into.declared.values(),
            target_arn=WORKER,
            role_arn=ROLE,
            dead_letter_arn=dead_letter_arn,
        )

    def target() -> dict[str, Any]:
        got = scheduler.get_schedule(Name="pgkick.periodic.nightly", GroupName="default")
        return dict(got["Target"])

    assert run(None)["created"] == ["pgkick.periodic.nightly"]  # as synced before the fix
    assert "DeadLetterConfig" not in target()
    assert run(None)["unchanged"] == ["pgkick.periodic.nightly"]  # AWS's defaults, as given
    assert run(dlq)["updated"] == ["pgkick.periodic.nightly"]
    assert target()["DeadLetterConfig"] == {"Arn": dlq}
    assert target()["RetryPolicy"] == {
        "MaximumEventAgeInSeconds": 3600,
        "MaximumRetryAttempts": 185,
    }
    assert run(dlq)["unchanged"] == ["pgkick.periodic.nightly"]
    other = "arn:aws:sqs:us-east-1:123456789012:other"
    assert run(other)["updated"] == ["pgkick.periodic.nightly"]
    assert run(None)["updated"] == ["pgkick.periodic.nightly"]  # unset: none, AWS's retries
    assert "DeadLetterConfig" not in target()
    assert target()["RetryPolicy"] == {
        "MaximumEventAgeInSeconds": 86400,
        "MaximumRetryAttempts": 185,
    }


def test_sync_puts_back_a_flexible_time_window_changed_by_hand(scheduler: Any) -> None:
    """Catches (review 61, F4): a sync that does not compare FlexibleTimeWindow, so a
    schedule edited to FLEXIBLE (the console, another tool) was reported unchanged and
    kept, its ticks firing up to the window's minutes late, though sync sets Mode OFF."""
    into = PeriodicRegistry()
    declare("cron(0 3 * * ? *)", task="nightly", into=into)

    def run() -> dict[str, list[str]]:
        return sync(scheduler, into.declared.values(), target_arn=WORKER, role_arn=ROLE)

    def window() -> dict[str, Any]:
        got = scheduler.get_schedule(Name="pgkick.periodic.nightly", GroupName="default")
        return dict(got["FlexibleTimeWindow"])

    assert run()["created"] == ["pgkick.periodic.nightly"]
    (periodic,) = into.declared.values()
    edited = desired(periodic, WORKER, ROLE)
    edited["FlexibleTimeWindow"] = {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}
    scheduler.update_schedule(GroupName="default", **edited)
    assert run()["updated"] == ["pgkick.periodic.nightly"]
    assert window() == {"Mode": "OFF"}
    assert run()["unchanged"] == ["pgkick.periodic.nightly"]


def test_a_sync_that_reads_no_declarations_deletes_nothing_unless_told(
    scheduler: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Catches (review 59, F4): a sync run where PGKICK_TASKS is unset (an operator's
    shell, a CI job missing one variable) reading no declarations and deleting every
    periodic schedule, exit 0; and one whose modules declare nothing doing the same
    without being told (--prune-all)."""
    (tmp_path / "jobs_two_ticks.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('cron(0 3 * * ? *)', task='two_nightly', timezone='Europe/Paris')\n"
        "def nightly(payload): ...\n\n"
        "@pgkick.periodic('rate(15 minutes)', task='two_often')\n"
        "def often(payload): ...\n"
    )
    (tmp_path / "jobs_no_ticks.py").write_text(
        "import pgkick  # tasks, maybe, but no periodic declaration\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PGKICK_WORKER_ARN", WORKER)
    monkeypatch.setenv("PGKICK_SCHEDULER_ROLE_ARN", ROLE)
    both = ["pgkick.periodic.two_nightly", "pgkick.periodic.two_often"]

    def run(tasks: str | None, *extra: str) -> int:
        if tasks is None:
            monkeypatch.delenv("PGKICK_TASKS", raising=False)
        else:
            monkeypatch.setenv("PGKICK_TASKS", tasks)
        try:
            return cli.main(["schedules", "sync", *extra])
        finally:  # each run as a fresh process: its own modules' declarations only
            for module in ("jobs_two_ticks", "jobs_no_ticks"):
                sys.modules.pop(module, None)
            for name in ("two_nightly", "two_often"):
                periodic_registry.declared.pop(name, None)

    assert run("jobs_two_ticks") == 0 and names(scheduler) == both
    capsys.readouterr()
    assert run(None) == 2 and names(scheduler) == both
    err = capsys.readouterr().err
    assert "no task modules" in err and "PGKICK_TASKS" in err
    for extra in ([], ["--dry-run"]):
        assert run("jobs_no_ticks", *extra) == 2 and names(scheduler) == both
        err = capsys.readouterr().err
        assert "declare no @pgkick.periodic" in err and "--prune-all" in err
    assert run("jobs_no_ticks", "--prune-all", "--dry-run") == 0 and names(scheduler) == both
    assert run("jobs_no_ticks", "--prune-all") == 0 and names(scheduler) == []


@pytest.fixture
def nightly() -> Iterator[Registry]:
    """A task and its periodic declaration, in the global registry the runtime reads."""
    tasks = Registry()
    tasks.task("nightly_report")(lambda payload: {"rows": payload["rows"]})
    declare("cron(0 3 * * ? *)", task="nightly_report", queue="reports", payload={"rows": 7})
    yield tasks
    periodic_registry.declared.pop("nightly_report", None)


def test_a_tick_delivered_twice_enqueues_and_runs_one_job(dsn: str, nightly: Registry) -> None:
    """The scheduler's at-least-once delivery, twice the same tick, then the next tick.
    Catches: no per-tick key (two jobs for one tick), and a key that ignores the time
    (the next day's tick would be dropped)."""
    runtime = Runtime(
        Settings.from_env({"PGKICK_KICKER": "none"}), NoKicker(), dsn=lambda: dsn, tasks=nightly
    )
    event = {"periodic": "nightly_report", "tick": TICK}
    first = runtime.tick(event, lambda: 60_000)
    again = runtime.tick(dict(event), lambda: 60_000)
    assert first["job"] is not None and again["job"] is None
    assert (first["done"], again["claimed"]) == (1, 0)
    assert job_row(dsn, first["job"])["result"] == {"rows": 7}
    next_day = runtime.tick({**event, "tick": "2026-12-01T03:00:00Z"}, lambda: 60_000)
    assert next_day["job"] not in (None, first["job"])


def test_racing_deliveries_of_one_tick_insert_one_job(dsn: str) -> None:
    """Two connections deliver the same tick: the first inserts inside a transaction left
    open, the second is started and seen blocked on the tick's key (pg_stat_activity),
    then the first commits. Catches: a check-then-insert dedupe (NOT EXISTS on
    periodic_ticks, or a SELECT first): the second's snapshot predates the first's
    commit, so it inserts a second job."""
    tick_at = datetime(2026, 11, 30, 3, tzinfo=UTC)
    got: list[int | None] = []

    def deliver(store: JobStore) -> None:
        got.append(
            store.enqueue_tick("race", tick_at, queue="q", task="t", payload="{}", attempts=5)
        )

    with JobStore.open(dsn) as first, JobStore.open(dsn) as second:
        pid = second.conn.info.backend_pid
        with first.transaction():
            deliver(first)
            racer = threading.Thread(target=deliver, args=(second,))
            racer.start()
            wait_for_lock_waiters(dsn, [pid])
        racer.join(WAIT)
        assert not racer.is_alive()
        assert len(got) == 2 and got[0] is not None and got[1] is None
        assert first.ready_by_queue() == {"q": 1}


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"periodic": "nightly_report", "tick": "yesterday"}, "is not an ISO time"),
        ({"periodic": "nightly_report", "tick": "2026-11-30T03:00:00"}, "has no time zone"),
        ({"periodic": "no such/thing", "tick": TICK}, "is not a periodic name"),
    ],
)
def test_bad_tick_events_are_refused_before_anything_is_written(
    dsn: str, nightly: Registry, event: dict[str, Any], message: str
) -> None:
    """Catches: a malformed tick reaching the database (a naive time read in the
    server's zone would key the tick wrongly)."""
    runtime = Runtime(
        Settings.from_env({"PGKICK_KICKER": "none"}), NoKicker(), dsn=lambda: dsn, tasks=nightly
    )
    with pytest.raises(ValueError, match=message):
        runtime.tick(event, lambda: 60_000)
    with JobStore.open(dsn) as store:
        assert store.ready_by_queue() == {}


def test_the_worker_handler_runs_a_tick_once_and_leaves_no_session(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Lambda handler, as the scheduler invokes it (its Input with the time filled in),
    twice. Catches: the handler not routing a tick (it would reject it as a bad kick), a
    second job for a redelivered tick, and a connection left open after the answer."""
    (tmp_path / "jobs_tick.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('rate(1 day)', task='daily_sum', queue='sums', payload={'n': 2})\n"
        "def daily_sum(payload):\n"
        "    return payload['n'] * 21\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, value in {"PGKICK_TASKS": "jobs_tick", "DATABASE_URL": dsn}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    try:
        app = load_handler("worker")
        tick = {"periodic": "daily_sum", "tick": TICK}
        first = app.handler(tick, FakeLambdaContext())
        again = app.handler(tick, FakeLambdaContext())
    finally:
        sys.modules.pop("jobs_tick", None)
        periodic_registry.declared.pop("daily_sum", None)
    assert (first["queue"], first["done"], again["job"], again["claimed"]) == ("sums", 1, None, 0)
    assert job_row(dsn, first["job"])["result"] == 42
    assert sessions_of(dsn) == 0


def test_the_reaper_forgets_ticks_older_than_the_retention(dsn: str, clock: Any) -> None:
    """Catches: periodic_ticks growing forever (one row per tick), or a purge that also
    drops recent ticks (a redelivery inside the retention would then run twice)."""
    from datetime import timedelta

    from pgkick.worker.reaper import reap

    with JobStore.open(dsn, clock) as store:
        old, recent = clock.now - timedelta(days=31), clock.now - timedelta(days=29)
        for when in (old, recent):
            store.enqueue_tick("p", when, queue="q", task="t", payload="{}", attempts=1)
        assert reap(store, NoKicker(), retention=timedelta(days=30))["purged_ticks"] == 1
        assert (
            store.enqueue_tick("p", recent, queue="q", task="t", payload="{}", attempts=1) is None
        )


def test_a_tick_is_remembered_as_long_as_it_can_come_back_whatever_the_retention(
    dsn: str, nightly: Registry
) -> None:
    """Catches (review 59, F6): PGKICK_RETENTION_DAYS=0 (allowed) purging the tick keys at
    once, so a tick delivered again afterwards (Scheduler retries for up to 24 h, a dead
    letter comes back from FailedKicksQueue days later) inserted a second job. Through
    Runtime.tick and Runtime.reap, the handlers' own paths; the reaper is the server's
    clock, so the tick's times are taken from it."""
    from datetime import timedelta

    from pgkick.tasks.recurring import TICK_KEYS_KEPT

    runtime = Runtime(
        Settings.from_env({"PGKICK_KICKER": "none", "PGKICK_RETENTION_DAYS": "0"}),
        NoKicker(),
        dsn=lambda: dsn,
        tasks=nightly,
    )
    with JobStore.open(dsn) as store:
        (now,) = store.conn.execute("SELECT now()").fetchone() or ()
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    late = (now - TICK_KEYS_KEPT + timedelta(hours=1)).astimezone(UTC)  # may still come back
    gone = (now - TICK_KEYS_KEPT - timedelta(hours=1)).astimezone(UTC)  # can come back no more
    events = [{"periodic": "nightly_report", "tick": when.strftime(stamp)} for when in (late, gone)]
    first = [runtime.tick(dict(event), lambda: 60_000)["job"] for event in events]
    assert None not in first
    assert runtime.reap(lambda: 60_000)["purged_ticks"] == 1  # the one past every redelivery
    assert runtime.tick(dict(events[0]), lambda: 60_000)["job"] is None  # still one job


def test_the_tick_keys_outlive_the_templates_failed_kicks_queue() -> None:
    """Catches template.yaml keeping failed kicks (or Lambda's async events) longer than
    the tick keys' floor assumes: a tick coming back from there would make a second job."""
    from datetime import timedelta

    from pgkick.tasks import recurring

    template = (Path(__file__).parents[1] / "template.yaml").read_text()
    queue = template[template.index("  FailedKicksQueue:\n") :]
    retention = re.search(r"MessageRetentionPeriod: (\d+)", queue)
    age = re.search(r"KickMaxEventAgeSeconds:(?:\n .*)*?\n    MaxValue: (\d+)", template)
    assert retention and age
    assert timedelta(seconds=int(retention[1])) == recurring.FAILED_KICKS_RETENTION
    assert timedelta(seconds=int(age[1])) == recurring.LAMBDA_MAX_EVENT_AGE
