"""A lingering worker's wake-up line: LISTEN on its queue's channel, name the channel on its
announcement, and wait on the socket for a producer's NOTIFY.

Why in the store: these are statements of the worker's session like its claims, and the
wait reads that same connection (a notification is a message on it). The policy, when to
listen and how long to wait, is pgkick.worker.linger's.

Why a pid check before LISTEN: behind a transaction-mode pooler (PgBouncer, RDS Proxy,
Neon's pooler) each transaction may run on another server session, so a LISTEN would
subscribe whichever server session ran it, left behind in the pool, and the worker would
never hear a thing. Such a pooler answers the startup with its own key, not the server
pid (PgBouncer does: tests/test_linger_notify.py), so `pg_backend_pid()` differs from the
pid the connection was opened with. A pooler that passed the server's pid through would
fool the check: PGKICK_WORKER_LISTEN=off is for it.
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

from pgkick.connections.db import Database
from pgkick.connections.qualify import quote
from pgkick.store import queries

_PLAIN = re.compile(r"[A-Za-z0-9_.:-]+")
CHANNEL_BYTES = 63  # NAMEDATALEN - 1: pg_notify refuses a longer channel


def queue_channel(schema: str, queue: str) -> str:
    """The channel producers NOTIFY for `queue` in `schema`: readable when the name is plain
    and short, else a digest (a channel is at most 63 bytes). Two queues sharing one would
    only wake a worker for nothing: it claims, finds nothing, and waits again."""
    plain = f"{schema}.{queue}"
    if _PLAIN.fullmatch(queue) and len(plain) <= CHANNEL_BYTES:
        return plain
    digest = hashlib.sha256(f"{schema}\0{queue}".encode()).hexdigest()[:40]
    return f"pgkick.{digest}"


class Listening(Database):
    """The statements and the wait of a worker's wake-up line (pgkick.worker.linger)."""

    def direct_session(self) -> bool:
        """True if statements run in the very server session this connection opened (no
        pooler in between), where a LISTEN stays with the connection."""
        pid = self.one(queries.SESSION_BACKEND_PID)[0]
        return bool(pid == self.conn.info.backend_pid)

    def listen(
        self, channel: str, queue: str, watcher: str, window: timedelta, *, subscribe: bool
    ) -> None:
        """LISTEN (if `subscribe`), then name the channel on the worker's announcement for
        `window`: one round trip, each its own transaction, the LISTEN committed first so no
        producer finds the channel before the session hears it."""
        with self.pipeline():
            if subscribe:
                self._channel_statement(queries.CHANNEL_LISTEN.format(channel=quote(channel)))
            self.execute(
                queries.QUEUE_WATCHER_LISTEN,
                channel=channel,
                queue=queue,
                watcher=watcher,
                window=window,
            )

    def unlisten(self, channel: str) -> None:
        self._channel_statement(queries.CHANNEL_UNLISTEN.format(channel=quote(channel)))

    def await_notification(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a notification on this session: True as soon as
        one came (or one had come during an earlier statement), False at the timeout."""
        with self._io:
            waiting = self.conn.notifies(timeout=timeout, stop_after=1)
            try:
                return next(waiting, None) is not None
            finally:
                waiting.close()  # gives the connection back at once, not when collected

    def _channel_statement(self, statement: str) -> None:
        with self._io:
            self.conn.execute(statement.encode(), prepare=False)
