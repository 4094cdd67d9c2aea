"""The activity-monitor emulator: its rule on chosen rows, and pgkick against polling for real."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pgkick_dev.awake.compare import ModeResult, Workload, compare
from pgkick_dev.awake.monitor import SHORT_SESSIONS, AwakeMonitor, AwakeReport, activity

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def row(
    app: str | None,
    state: str | None,
    changed: float,
    *,
    now: float,
    kind: str = "client backend",
    sessions: int = 1,
) -> dict[str, Any]:
    return {
        "now": T0 + timedelta(seconds=now),
        "sessions_ever": sessions,
        "pid": 1,
        "application_name": app,
        "backend_type": kind,
        "state": state,
        "state_change": T0 + timedelta(seconds=changed),
    }


def test_rule_busy_is_now_idle_is_its_last_change() -> None:
    rows = [row("app", "idle", 5, now=100), row("job", "idle in transaction", 1, now=100)]
    assert activity(rows, frozenset()) == (T0 + timedelta(seconds=100), {"job"})
    rows = [row("a", "idle", 5, now=100), row("b", "idle", 40, now=100)]
    assert activity(rows, frozenset()) == (T0 + timedelta(seconds=40), {"b"})
    vacuum = [row(None, None, 0, now=100, kind="autovacuum worker")]
    assert activity(vacuum, frozenset()) == (T0 + timedelta(seconds=100), {"autovacuum worker"})
    assert activity([row("me", "active", 0, now=100)], frozenset({"me"})) == (None, set())


def test_monitor_suspends_after_the_window_and_resumes_on_a_new_session() -> None:
    monitor = AwakeMonitor("unused", window=10)
    looks = [
        [row("app", "idle", 0, now=0)],  # the watch starts on an awake compute
        [row("app", "idle", 0, now=9)],  # idle 9 s < 10: awake
        [row("app", "idle", 0, now=11)],  # idle 11 s: suspend
        [row("app", "idle", 0, now=30)],  # still suspended: an idle session is no activity
        [row(None, None, 0, now=31, sessions=2) | {"pid": None}],  # a session came and went
        [row("app", "active", 0, now=32, sessions=2)],
    ]
    awake = [monitor.sample(look, 1.0, None) for look in looks]
    assert awake == [True, True, False, False, True, True]
    report = monitor.report
    assert (report.suspends, report.resumes, report.awake_seconds) == (1, 1, 4.0)
    assert report.kept_awake_by == {SHORT_SESSIONS: 1.0, "app": 1.0}


def test_pgkick_lets_the_compute_suspend_between_bursts_polling_never(
    dsn: str, tmp_path: Path
) -> None:
    results = compare(
        dsn,
        Workload(bursts=2, jobs_per_burst=20, gap=5.0, window=1.5),
        modes=("pgkick", "poll"),
        png=tmp_path / "awake.png",
        log=tmp_path / "workers.log",
    )
    pgkick, poll = (r.report for r in results)
    assert [r.jobs_done for r in results] == [40, 40]
    assert pgkick.suspends >= 2 and pgkick.resumes >= 1  # asleep between and after bursts
    assert pgkick.awake_fraction < 0.8
    assert poll.suspends == 0 and poll.awake_fraction > 0.9
    assert results[1].empty_polls > results[0].empty_polls
    picture = (tmp_path / "awake.png").read_bytes()
    assert picture.startswith(b"\x89PNG\r\n\x1a\n") and len(picture) > 500


def test_the_minimum_awake_time_counts_each_burst_and_the_first_window_once() -> None:
    result = ModeResult(
        mode="pgkick",
        report=AwakeReport(window=2.0),
        empty_polls=0,
        jobs_done=3,
        job_seconds=[1.0, 1.5, 11.0],
        burst_seconds=[0.5, 10.0],
    )
    # awake at the start until 2.0, burst 1 until 1.5 + 2, burst 2 from 10 until 11 + 2
    assert result.minimum_awake(2.0) == 3.5 + 3.0
    assert result.minimum_awake(9.0) == 20.0  # the window bridges the gap: [0, 20) once


def test_the_chart_reads_each_modes_awake_fraction(tmp_path: Path) -> None:
    """Catches a chart whose spans or fractions are wrong: an interval dropped or counted
    twice, a sample past the end counted beyond the run's duration."""
    from pgkick_dev.awake.chart import Lane, render

    lane = Lane("pgkick", [(2.0, True), (6.0, False), (7.0, True), (12.0, False)], [1.0, 6.5])
    assert lane.intervals(10.0) == [
        (0.0, 2.0, True),
        (2.0, 4.0, False),
        (6.0, 1.0, True),
        (7.0, 3.0, False),
    ]
    assert lane.awake_fraction() == 3.0 / 12.0  # over its own 12 s, not the picture's 10
    picture = render(tmp_path / "a.png", [lane, Lane("poll", [(10.0, True)])], 10.0)
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_the_demos_picture_says_what_its_table_says(tmp_path: Path) -> None:
    """Catches the picture contradicting the table (#27, defect 7): runs of different
    lengths labelled against the longest one (table 70% / 99% / 100%, picture 31% / 45% /
    45%); and a report that does not say what a healthy result looks like."""
    from pgkick_dev.awake.chart import label, render
    from pgkick_dev.awake.compare import ModeResult, lanes
    from pgkick_dev.awake.monitor import AwakeReport
    from pgkick_dev.demo import report as demo_report

    def result(mode: str, duration: float, awake: float) -> ModeResult:
        timeline = [(awake, True), (duration, False)]
        report = AwakeReport(window=2.0, duration=duration, awake_seconds=awake, timeline=timeline)
        return ModeResult(mode, report, 0, 150, [1.0], [0.0])

    results = [result("pgkick", 10, 7), result("poll", 20, 19.8), result("listen", 23, 23)]
    summary = {
        "jobs": 1,
        "by_status": {"done": 1},
        "attempts": {"1": 1},
        "burst_jobs_per_second": 500,
        "single_invocations": 1,
        "single_trickle": {"environments": 1, "pauses": 0, "hand_overs": 0},
        "kick_to_start_ms": {"p50": 1.0, "p99": 2.0},
        "killed_job": {"id": 1, "attempts": 2},
        "awake": {},
        "ok": True,
    }
    table = demo_report.render(summary, [r.as_dict() for r in results])
    printed = {line.split()[0]: line.split()[1] for line in table.splitlines()[-14:] if "%" in line}
    charted = {lane.label: label(lane).split()[-1] for lane in lanes(results)}
    assert charted == {"pgkick": "70%", "poll": "99%", "listen": "100%"}
    assert {mode: printed[mode] for mode in charted} == charted
    assert "a healthy run" in table and "vary with this machine and its load" in table
    render(tmp_path / "awake.png", lanes(results), 23.0)
