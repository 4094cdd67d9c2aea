"""The local kicker as EventBridge Scheduler's stand-in: each periodic declaration's ticks
fired by one timer sleeping until the tick (no polling), at the scheduler's times across
daylight saving changes, delivered twice and still one job, and silent once closed.
Timers and clock are the test's own (no sleeps). Each test names the break it catches;
each break was applied by hand and seen to fail."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick.tasks.recurring import Periodic, PeriodicRegistry, declare, periodic_registry
from pgkick_dev.devserver.cli import sync_periodic
from pgkick_dev.devserver.clock import ManualClock
from pgkick_dev.devserver.stack import FunctionSpec, Stack
from pgkick_dev.local.cron import next_tick
from pgkick_dev.local.kicker import LocalKicker
from pgkick_dev.local.ticks import PeriodicTimers
from tests.helpers import FakeClock


class FakeTimer:
    def __init__(self, due: datetime, fire: Callable[[], None]) -> None:
        self.due, self.fire, self.cancelled = due, fire, False

    def cancel(self) -> None:
        self.cancelled = True


class FakeTimers:
    """Timers that fire when the test says, with the clock moved to their due time."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.started: list[FakeTimer] = []

    def __call__(self, delay: float, fire: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.clock.now + timedelta(seconds=delay), fire)
        self.started.append(timer)
        return timer

    def live(self) -> list[FakeTimer]:
        return [t for t in self.started if not t.cancelled and not getattr(t, "fired", False)]

    def fire_next(self) -> None:
        timer = min(self.live(), key=lambda t: t.due)
        self.clock.now = timer.due
        timer.fired = True  # type: ignore[attr-defined]
        timer.fire()


def one(expression: str, timezone: str = "UTC", name: str = "p") -> Periodic:
    return declare(expression, task="t", name=name, timezone=timezone, into=PeriodicRegistry())


def fired(expression: str, timezone: str, start: datetime, count: int) -> list[str]:
    """The tick times delivered by `count` timer firings from `start`."""
    clock, timers = FakeClock(start), FakeTimers(FakeClock())
    timers.clock = clock
    events: list[dict[str, Any]] = []
    ticks = PeriodicTimers([one(expression, timezone)], events.append, now=clock,
                           start_timer=timers, deliveries=1)  # fmt: skip
    for _ in range(count):
        timers.fire_next()
    assert len(timers.started) == count + 1  # one timer per tick: nothing wakes in between
    assert ticks.due() == {"p": timers.live()[0].due}
    return [e["tick"] for e in events]


def test_ticks_skip_the_spring_gap_and_fire_once_in_the_autumn_overlap() -> None:
    """Paris: 02:30 does not exist on 29 March 2026 and happens twice on 25 October.
    Catches: evaluating cron in UTC (every tick an hour off in summer), moving a
    missing time to 03:30 instead of skipping it (the scheduler skips), and firing a
    repeated local time twice (the scheduler fires it once, at its first occurrence)."""
    spring = fired("cron(30 2 * * ? *)", "Europe/Paris", datetime(2026, 3, 27, tzinfo=UTC), 4)
    assert spring == [
        "2026-03-27T01:30:00Z",  # CET, UTC+1
        "2026-03-28T01:30:00Z",
        "2026-03-30T00:30:00Z",  # 29 March skipped; CEST, UTC+2
        "2026-03-31T00:30:00Z",
    ]
    autumn = fired(
        "cron(0/30 2 * * ? *)", "Europe/Paris", datetime(2026, 10, 23, 22, tzinfo=UTC), 6
    )
    assert autumn == [
        "2026-10-24T00:00:00Z",
        "2026-10-24T00:30:00Z",
        "2026-10-25T00:00:00Z",  # 02:00 and 02:30 CEST, first occurrences only
        "2026-10-25T00:30:00Z",
        "2026-10-26T01:00:00Z",  # CET from here
        "2026-10-26T01:30:00Z",
    ]


def test_a_rate_counts_fixed_durations_from_the_epoch() -> None:
    """Catches: a rate that follows the wall clock across the change (rate(1 day) is 24
    hours, whatever the time zone), and rate ticks counted from each process's start
    (two local processes would name different ticks, so two jobs per period)."""
    start = datetime(2026, 3, 28, 23, 59, 30, tzinfo=UTC)
    assert fired("rate(1 day)", "Europe/Paris", start, 2) == [
        "2026-03-29T00:00:00Z",
        "2026-03-30T00:00:00Z",
    ]
    assert fired("rate(5 minutes)", "UTC", start, 2) == [
        "2026-03-29T00:00:00Z",
        "2026-03-29T00:05:00Z",
    ]


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("cron(0 12 L * ? *)", "2026-02-01", "2026-02-28T12:00"),
        ("cron(0 12 LW * ? *)", "2026-05-01", "2026-05-29T12:00"),  # 31st is a Sunday
        ("cron(0 12 15W * ? *)", "2026-08-01", "2026-08-14T12:00"),  # the 15th is a Saturday
        ("cron(0 12 1W * ? *)", "2026-08-01", "2026-08-03T12:00"),  # never into July
        ("cron(0 12 ? * 6#3 *)", "2026-11-01", "2026-11-20T12:00"),  # third Friday
        ("cron(0 12 ? * 6L *)", "2026-11-01", "2026-11-27T12:00"),  # last Friday
        ("cron(0/15 8-17 ? * MON-FRI *)", "2026-11-28", "2026-11-30T08:00"),  # Sat -> Mon
        ("cron(0 0 1 JAN,JUL ? 2027)", "2026-11-28", "2027-01-01T00:00"),
        ("cron(0 0 1 1 ? 2020-2025)", "2026-01-01", None),  # no tick left
    ],
)
def test_cron_fields_as_the_scheduler_reads_them(
    expression: str, after: str, expected: str | None
) -> None:
    """Catches: L, W, #, day and month names, lists, steps and the year field misread
    (e.g. day-of-week counted from Monday, or W crossing into the previous month)."""
    got = next_tick(expression, "UTC", datetime.fromisoformat(after).replace(tzinfo=UTC))
    assert (got and got.strftime("%Y-%m-%dT%H:%M")) == expected


def test_closing_the_kicker_stops_its_timers(tmp_path: Path) -> None:
    """Catches: close() leaving a tick timer armed (an app's ticks after shutdown), and a
    timer whose callback was already running when close() came delivering or re-arming."""
    clock = FakeClock(datetime(2026, 11, 30, tzinfo=UTC))
    timers = FakeTimers(clock)
    kicker = LocalKicker(
        periodic=[one("rate(1 minute)", name="a"), one("cron(0 3 * * ? *)", name="b")],
        tick_clock=clock,
        tick_timer=timers,
        output=tmp_path / "workers.log",
    )
    assert set(kicker.ticks()) == {"a", "b"} and len(timers.live()) == 2
    late = timers.live()[0]
    kicker.close()
    assert timers.live() == [] and kicker.ticks() == {}
    clock.now = late.due
    late.fire()  # a callback already under way when close() cancelled it
    assert len(timers.started) == 2 and kicker.stats.events == 0


def test_a_tick_delivered_twice_by_the_stand_in_runs_one_job(dsn: str, tmp_path: Path) -> None:
    """The stand-in's own at-least-once: one timer firing sends the tick twice, to two
    real worker processes at once. Catches: no timer firing the declaration (no job),
    an event unlike the scheduler's (the worker rejects it), and a stand-in that
    delivers once (the duplicate path never exercised: invocations would be 1)."""
    (tmp_path / "jobs_local_tick.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('cron(0 3 * * ? *)', task='local_sum', queue='sums', payload={'n': 2})\n"
        "def local_sum(payload):\n"
        "    return payload['n'] * 21\n"
    )
    clock = FakeClock(datetime(2026, 11, 30, 2, 59, tzinfo=UTC))
    timers = FakeTimers(clock)
    declared = declare("cron(0 3 * * ? *)", task="local_sum", queue="sums", payload={"n": 2},
                       into=PeriodicRegistry())  # fmt: skip
    kicker = LocalKicker(
        env={"DATABASE_URL": dsn, "PGKICK_TASKS": "jobs_local_tick", "PYTHONPATH": str(tmp_path)},
        concurrency=2,
        output=tmp_path / "workers.log",
        periodic=[declared],
        tick_clock=clock,
        tick_timer=timers,
    )
    try:
        assert timers.live()[0].due == datetime(2026, 11, 30, 3, tzinfo=UTC)
        timers.fire_next()
        assert kicker.wait_idle(60)
        results = kicker.stats.results
    finally:
        kicker.close()
    assert kicker.stats.invocations == 2 and kicker.stats.failed_kicks == []
    assert sorted(r["tick"] for r in results) == ["2026-11-30T03:00:00+00:00"] * 2
    assert sorted(str(r["job"]) for r in results)[1] == "None"  # the duplicate wrote nothing
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT queue, status, result FROM pgkick.jobs").fetchall()
    assert rows == [("sums", "done", 42)]


def test_the_dev_stack_makes_the_task_modules_declarations_schedules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pgkick dev` creates the schedules `pgkick schedules sync` would, from PGKICK_TASKS.
    Catches: a local stack that never learns the declarations (the README's old advice:
    send ticks yourself)."""
    (tmp_path / "jobs_app_tick.py").write_text(
        "import pgkick\n\n"
        "@pgkick.periodic('cron(0 3 1 1 ? 2199)', task='far_off')\n"
        "def far_off(payload): ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    stack = Stack([FunctionSpec("pgkick-worker")], clock=ManualClock())
    try:
        assert sync_periodic(stack, ("jobs_app_tick",)) == ["pgkick.periodic.far_off"]
        (schedule,) = stack.scheduler.list()
        assert schedule.due == datetime(2199, 1, 1, 3, tzinfo=UTC).timestamp()
        assert "far_off" in schedule.body["Target"]["Input"]
    finally:
        stack.close()
        sys.modules.pop("jobs_app_tick", None)
        periodic_registry.declared.pop("far_off", None)
