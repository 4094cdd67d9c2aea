"""Database sessions the workers opened, counted by PostgreSQL itself.

Why from the database: the environments are AWS's emulator running Lambda's runtime
client; nothing in them reports to the stack but the handler's answer, which does not
count connections. PostgreSQL does (`pg_stat_database.sessions`, every session ever
established). A session's count is certain once it has ended, so `opened()` waits
for every other session to leave (call it after the kicker is closed); the
counter's own session is counted before it starts, so it is not in the figure.
"""

from __future__ import annotations

import time

import psycopg

from pgkick_dev.queries import (
    SESSION_COUNT_ESTABLISHED,
    SESSION_COUNT_OTHERS,
    SESSION_STATS_FLUSH,
)


class SessionCounter:
    """Sessions established in a database between `__init__` and `opened()`, excluding its own."""

    def __init__(self, dsn: str) -> None:
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute(SESSION_STATS_FLUSH)  # its own session counted before, not after
        self._others_gone(10)  # a session ending now is counted before, not after
        self._before = self._read()

    def _others_gone(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self._conn.execute(SESSION_COUNT_OTHERS).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.05)

    def _read(self) -> int:
        row = self._conn.execute(SESSION_COUNT_ESTABLISHED).fetchone()
        return int(row[0]) if row else 0

    def opened(self, timeout: float = 30) -> int:
        """Sessions opened since, once every other session has ended (or `timeout`)."""
        self._others_gone(timeout)
        try:
            return self._read() - self._before
        finally:
            self._conn.close()
