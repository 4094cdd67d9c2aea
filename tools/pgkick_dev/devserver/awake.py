"""`pgkick dev`'s activity monitor: measured awake time on the embedded database only.

Why only there: the monitor (pgkick_dev.awake.monitor) keeps a session open and looks
at pg_stat_activity every half second. On the embedded PostgreSQL that `pgkick dev`
started itself this costs nothing, and the dashboard's timeline can then show when a
serverless compute would have been awake and which application kept it so. On a named
database (--dsn, $DATABASE_URL) that session would itself keep a real serverless
database awake, so the monitor runs there only with --awake-monitor (the banner warns),
and the dashboard keeps its estimate from the invocations.
"""

from __future__ import annotations

from pgkick_dev.awake.monitor import AwakeMonitor

WINDOW = 300.0  # the dashboard's suspend window (Neon's five minutes)


def start_monitor(
    dsn: str, *, embedded: bool, asked: bool, window: float = WINDOW
) -> tuple[AwakeMonitor | None, str]:
    """The monitor to run for the stack's lifetime (None: none) and the banner's line."""
    if embedded:
        monitor = AwakeMonitor(dsn, window=window).start()
        return monitor, (
            f"awake: measured by the activity monitor on the embedded database ({window:.0f} s "
            "suspend window); the dashboard's timeline shows its spans"
        )
    if asked:
        monitor = AwakeMonitor(dsn, window=window).start()
        return monitor, (
            "WARNING: --awake-monitor on a named database: its session (application_name "
            "pgkick-awake) keeps a serverless database awake the whole time; the dashboard "
            "keeps its estimate from invocations, the monitor's report is printed at exit"
        )
    return None, (
        "awake: estimated from invocations (no monitor on a named database: its session would "
        "keep a serverless database awake; --awake-monitor to run it anyway)"
    )


def report_line(monitor: AwakeMonitor) -> str:
    """What the monitor measured, said at shutdown."""
    report = monitor.stop().as_dict()
    kept = ", ".join(f"{app} {s} s" for app, s in report["kept_awake_by"].items()) or "nothing"
    return (
        f"pgkick dev: database awake {report['awake_seconds']} s of "
        f"{report['duration_seconds']} s (suspends {report['suspends']}, resumes "
        f"{report['resumes']}); kept awake by: {kept}"
    )
