"""`pgkick awake`: the scale-to-zero activity monitor, emulated against any PostgreSQL.

Why: pgkick's main claim is that nothing keeps a serverless database awake, and
a claim is only worth its measurement. The article describes the rule the
compute applies every half second:

- a client session that is not idle (running a query, idle in transaction) is
  activity now; an idle one is activity at its last state change;
- a running autovacuum worker or a replication connection is activity now;
- after `window` seconds with no activity the compute suspends and closes every
  connection; the next connection resumes it.

A session that connects and leaves between two looks is still seen: the
database's session counter (pg_stat_database.sessions) moved, and a connection
is what wakes a compute.

The monitor samples `pg_stat_activity` on its own session (which it leaves
out), applies that rule, and reports awake time, suspends, resumes and which
application kept the compute awake. Scope: the monitored database's client
sessions, plus the server's autovacuum workers and walsenders.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pgkick.connections.db import Database, DatabaseError
from pgkick.errors import DatabaseUnavailable
from pgkick_dev import queries as dev_queries

SHORT_SESSIONS = "short-lived sessions"  # connected and gone between two looks
DEFAULT_WINDOW = 600.0  # Relyt One suspends after about ten idle minutes (Neon: five)


@dataclass
class AwakeReport:
    window: float
    duration: float = 0.0
    awake_seconds: float = 0.0
    suspends: int = 0
    resumes: int = 0
    closed_sessions: int = 0
    kept_awake_by: dict[str, float] = field(default_factory=dict)
    timeline: list[tuple[float, bool]] = field(default_factory=list)  # (seconds, awake)

    @property
    def awake_fraction(self) -> float:
        return self.awake_seconds / self.duration if self.duration else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "window_seconds": self.window,
            "duration_seconds": round(self.duration, 1),
            "awake_seconds": round(self.awake_seconds, 1),
            "awake_fraction": round(self.awake_fraction, 3),
            "suspends": self.suspends,
            "resumes": self.resumes,
            "closed_sessions": self.closed_sessions,
            "kept_awake_by": {
                app: round(seconds, 1)
                for app, seconds in sorted(self.kept_awake_by.items(), key=lambda i: -i[1])
            },
        }


def activity(
    rows: list[dict[str, Any]], ignore: frozenset[str]
) -> tuple[datetime | None, set[str]]:
    """Latest activity among the sessions (now for busy ones) and who is responsible for it."""
    latest: datetime | None = None
    who: set[str] = set()
    for row in rows:
        app = row["application_name"] or row["backend_type"]
        if row["pid"] is None or app in ignore:
            continue
        busy = row["backend_type"] != "client backend" or row["state"] != "idle"
        at = row["now"] if busy else row["state_change"]
        if at is None:
            continue
        if latest is None or at > latest:
            latest, who = at, {app}
        elif at == latest:
            who.add(app)
    return latest, who


class AwakeMonitor:
    """Samples every `interval` seconds in a thread; `stop()` returns the report."""

    def __init__(
        self,
        dsn: str,
        *,
        window: float = DEFAULT_WINDOW,
        interval: float = 0.5,
        close_on_suspend: bool = False,
        ignore: frozenset[str] = frozenset(),
        close_only: frozenset[str] | None = None,
    ) -> None:
        """close_only: at a suspend, close only sessions with these application names (the
        caller's own: a comparison must never end an app's sessions); None closes all."""
        self.dsn = dsn
        self.close_only = sorted(close_only) if close_only is not None else None
        self.interval = interval
        self.close_on_suspend = close_on_suspend
        self.ignore = ignore | {"pgkick-awake"}
        self.report = AwakeReport(window=window)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_activity: datetime | None = None  # the first look counts as activity
        self._blame: set[str] = set()
        self._sessions: int | None = None
        self._awake = True
        self.started = 0.0
        self.started_at = 0.0  # wall clock (epoch seconds) at `started`, for the dashboard

    def start(self) -> AwakeMonitor:
        self.started = time.monotonic()
        self.started_at = time.time()
        self._thread = threading.Thread(target=self._run, name="pgkick-awake", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> AwakeReport:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.report

    def awake_spans(self) -> list[tuple[float, float]]:
        """The measured awake spans so far, as (start, end) epoch seconds: what the dev
        dashboard draws. A look covers the time since the one before it."""
        spans: list[tuple[float, float]] = []
        previous = 0.0
        for at, awake in list(self.report.timeline):  # a copy: the thread appends
            if awake and spans and spans[-1][1] == self.started_at + previous:
                spans[-1] = (spans[-1][0], self.started_at + at)
            elif awake:
                spans.append((self.started_at + previous, self.started_at + at))
            previous = at
        return spans

    def kept_awake_by(self) -> dict[str, float]:
        """Seconds of awake time each application is responsible for, so far."""
        return dict(self.report.kept_awake_by)

    def _run(self) -> None:
        previous = time.monotonic()
        while not self._stop.is_set():
            try:  # the server may restart or refuse us: look again, as the real monitor would
                with Database.open(self.dsn, application_name="pgkick-awake") as db:
                    while True:
                        rows = db.dicts(dev_queries.SESSION_LIST_ACTIVITY)
                        self.sample(rows, time.monotonic() - previous, db)
                        previous = time.monotonic()
                        if self._stop.wait(self.interval):
                            break
            except (DatabaseUnavailable, DatabaseError):  # reconnect next round
                self._stop.wait(self.interval)
        self.report.duration = time.monotonic() - self.started

    def sample(self, rows: list[dict[str, Any]], elapsed: float, db: Database | None) -> bool:
        """Apply the rule to one look at the sessions; returns whether the compute is awake."""
        now, sessions = rows[0]["now"], rows[0]["sessions_ever"]
        latest, who = activity(rows, frozenset(self.ignore))
        if self._last_activity is None:
            self._last_activity = now  # watching starts on an awake compute
        elif sessions is not None and self._sessions is not None and sessions > self._sessions:
            # A session came and went between two looks: its connection woke the compute.
            latest, who = now, {SHORT_SESSIONS}
        self._sessions = sessions
        if latest is not None and latest > self._last_activity:
            self._last_activity, self._blame = latest, who
        awake = bool((now - self._last_activity).total_seconds() < self.report.window)
        if awake and not self._awake:
            self.report.resumes += 1
        if self._awake and not awake:
            self.report.suspends += 1
            if self.close_on_suspend and db is not None:
                self.report.closed_sessions += int(
                    db.one(
                        dev_queries.SESSION_TERMINATE_CLIENTS,
                        window=self.report.window,
                        apps=self.close_only,
                    )[0]
                )
        if awake:
            self.report.awake_seconds += elapsed
            for app in self._blame:
                self.report.kept_awake_by[app] = self.report.kept_awake_by.get(app, 0) + elapsed
        self._awake = awake
        self.report.timeline.append((time.monotonic() - self.started, awake))
        return awake
