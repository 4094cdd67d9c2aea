"""The producer's single connection: reused while calls keep coming, closed soon after the last.

Why: opening a connection costs a TCP and SCRAM handshake (~5 ms here), so an
app that reads one result per request would pay more to connect than to ask.
Keeping one open forever would break the promise that no session stays open
without work (a scale-to-zero database counts sessions). So the connection
lingers: each call reuses it, and a closer thread ends it `linger` seconds after
the last use, far inside any idle-suspend window. Nothing is sent while it lingers.

It is the threads' pool (`pgkick.connections.pool`) with one connection, where a
caller that finds it busy gets a connection of its own for that call instead of
waiting; every other rule is the lingering core's (`pgkick.connections.idle`): a
connection the server spoke on while idle is discarded before use (nothing is
retried after a statement was sent, so nothing is sent twice), and a forked child
never touches its parent's connection. This module also closes and counts every
lingering connection of the process (`close_all`, `opened_total`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pgkick.connections import pool
from pgkick.connections.idle import APPLICATION_NAME, DEFAULT_LINGER_SECONDS, server_spoke

__all__ = [
    "APPLICATION_NAME",
    "DEFAULT_LINGER_SECONDS",
    "LingeringConnection",
    "close_all",
    "opened_total",
    "server_spoke",
    "shared",
]


class LingeringConnection(pool.LingeringPool):
    """One DSN's reusable connection; `linger` 0 means a new connection for every call."""

    def __init__(
        self,
        dsn: str,
        linger: float = DEFAULT_LINGER_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        closer: bool = True,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            dsn, linger, 1, clock=clock, closer=closer, overflow=True, on_close=on_close
        )


def shared(dsn: str, linger: float) -> LingeringConnection:
    """The process's lingering connection for this DSN (made on first use)."""
    return pool.shared_of(LingeringConnection, dsn, linger)


def opened_total() -> int:
    """Connections the process's lingering producers have opened so far (the benchmark's)."""
    return pool.opened_total()


def close_all() -> None:
    """Close every lingering connection now (at exit, or when an app wants it)."""
    pool.close_all()
