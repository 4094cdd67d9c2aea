"""A kicker that, when called, looks at the database from its own connection.

Why: a kick sent just before the commit leaves the same rows and the same list of
kicks as one sent just after it; only a look at the database at the moment of the
kick tells them apart. The witness records which jobs of the kicked queue another
connection can see (committed ones only), and whether any other session of the
database, or the app's own connection when it is given, is still inside a
transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg


@dataclass(frozen=True, slots=True)
class Call:
    """What a kicker saw when it was called."""

    queue: str
    kind: str  # "kick" or "wake"
    committed: list[int]  # ids of the queue's jobs visible from another connection
    sessions_in_transaction: int  # other sessions of this database inside a transaction
    app_in_transaction: bool | None  # the app's own connection, when the witness knows it


class CommitWitness:
    """A kicker that records what the database looks like, from outside, when it is called."""

    def __init__(self, dsn: str, app_conn: psycopg.Connection[Any] | None = None) -> None:
        self.dsn = dsn
        self.app_conn = app_conn
        self.calls: list[Call] = []

    def kick(self, queue: str, reason: str, **kw: Any) -> None:
        self.calls.append(self._look(queue, "kick"))

    def wake_at(self, queue: str, when: datetime, **kw: Any) -> None:
        self.calls.append(self._look(queue, "wake"))

    def by_queue(self) -> dict[str, list[Call]]:
        calls: dict[str, list[Call]] = {}
        for call in self.calls:
            calls.setdefault(call.queue, []).append(call)
        return calls

    def _look(self, queue: str, kind: str) -> Call:
        with psycopg.connect(self.dsn, autocommit=True) as own:
            ids = [
                r[0] for r in own.execute("SELECT id FROM pgkick.jobs WHERE queue = %s", (queue,))
            ]
            row = own.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                " AND (state LIKE 'idle in transaction%' OR backend_xid IS NOT NULL)"
            ).fetchone()
        app = None
        if self.app_conn is not None:
            status = self.app_conn.info.transaction_status
            app = status != psycopg.pq.TransactionStatus.IDLE
        return Call(queue, kind, sorted(ids), int(row[0]) if row else 0, app)
