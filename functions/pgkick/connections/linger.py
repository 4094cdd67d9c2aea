"""The producer's connection: reused while enqueues keep coming, closed soon after the last.

Why: opening a connection costs a TCP and SCRAM handshake (~5 ms here), so an
app that enqueues one job per request would pay more to connect than to insert.
Keeping one open forever would break the promise that no session stays open
without work (a scale-to-zero database counts sessions). So the connection
lingers: each enqueue reuses it, and a closer thread ends it `linger` seconds
after the last use, far inside any idle-suspend window. Nothing is sent while
it lingers.

Rules that keep it safe:
- One caller at a time. A caller that finds it busy (another thread) gets a
  connection of its own for that call instead of waiting.
- A connection whose server has spoken while it sat idle (a terminated backend,
  a suspended compute) is discarded before use; nothing is retried after a
  statement was sent, so an insert is never sent twice.
- A forked child never touches its parent's connection (closing it would end
  the parent's session); it opens its own.
"""

from __future__ import annotations

import atexit
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pgkick.connections.db import Connection, connect, no_transaction

APPLICATION_NAME = "pgkick-producer"
DEFAULT_LINGER_SECONDS = 1.0


class LingeringConnection:
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
        self.dsn = dsn
        self.linger = linger
        self.clock = clock
        self.closer = closer  # tests drive close_if_idle() themselves with an injected clock
        self.on_close = on_close
        self.opened = 0  # connections made, for tests and the benchmark
        self._conn: Connection | None = None
        self._pid = os.getpid()
        self._last_used = 0.0
        self._busy = threading.Lock()

    @contextmanager
    def connection(self, retries: int = 0) -> Iterator[Connection]:
        """An autocommit connection for one call; kept for the next one if all went well."""
        if self.linger <= 0 or not self._busy.acquire(blocking=False):
            with self._connect(retries) as conn:  # a connection of its own, closed on exit
                yield conn
            return
        try:
            conn = self._take(retries)
            try:
                yield conn
            except BaseException:
                if conn.broken or not no_transaction(conn):
                    self._discard()
                raise
            self._last_used = self.clock()
        finally:
            self._busy.release()

    def close_if_idle(self) -> bool:
        """Close the connection if unused for `linger` seconds; True if it is closed now."""
        if not self._busy.acquire(blocking=False):
            return False
        try:
            if self._conn is not None and self.clock() - self._last_used >= self.linger:
                self._discard()
            return self._conn is None
        finally:
            self._busy.release()

    def close(self) -> None:
        with self._busy:
            self._discard()

    def _take(self, retries: int) -> Connection:
        if self._pid != os.getpid():  # forked: the parent's socket is not ours to use or close
            self._conn, self._pid = None, os.getpid()
        if self._conn is not None and (self._conn.closed or server_spoke(self._conn)):
            self._discard()
        if self._conn is None:
            self._conn = self._connect(retries)
            self._last_used = self.clock()
            if self.closer:
                closer = threading.Thread(target=self._close_when_idle, args=(self._conn,))
                closer.daemon = True
                closer.start()
        return self._conn

    def _connect(self, retries: int) -> Connection:
        self.opened += 1
        return connect(self.dsn, retries=retries, application_name=APPLICATION_NAME)

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            if self.on_close:
                self.on_close()

    def _close_when_idle(self, mine: Connection) -> None:
        """The closer thread: one per opened connection, gone once that connection is."""
        while self._conn is mine:
            time.sleep(max(self._last_used + self.linger - self.clock(), self.linger / 10))
            self.close_if_idle()


def server_spoke(conn: Connection) -> bool:
    """An idle connection has nothing to say; readable means the server closed it."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


_shared: dict[str, LingeringConnection] = {}
_shared_lock = threading.Lock()


def shared(dsn: str, linger: float) -> LingeringConnection:
    """The process's lingering connection for this DSN (made on first use)."""
    with _shared_lock:
        lingering = _shared.get(dsn)
        if lingering is None or lingering.linger != linger:
            lingering = _shared[dsn] = LingeringConnection(dsn, linger)
        return lingering


def opened_total() -> int:
    """Connections the process's lingering producers have opened so far (the benchmark's)."""
    with _shared_lock:
        lone = sum(lingering.opened for lingering in _shared.values())
    return lone + sum(opened() for opened, _ in _sources)


_sources: list[tuple[Callable[[], int], Callable[[], None]]] = []


@atexit.register
def close_all() -> None:
    """Close every lingering connection now (at exit, or when an app wants it)."""
    with _shared_lock:
        for lingering in _shared.values():
            if lingering._pid == os.getpid():
                lingering.close()
        _shared.clear()
    for _, close in _sources:
        close()


def register_source(opened: Callable[[], int], close: Callable[[], None]) -> None:
    """Other lingering connections (pgkick.connections.pool's) report here, so that
    opened_total and close_all cover them without this module importing theirs."""
    _sources.append((opened, close))
