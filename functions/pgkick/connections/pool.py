"""The producer's connections under threads: a few, shared, each closed soon after its last use.

Why a pool and not one connection: with one lingering connection, a thread that
found it busy opened a connection of its own for that call (a TCP + SCRAM
handshake, and on a serverless database a session): 8 threads opened ~1,900
sessions for 4,000 jobs. Here a thread borrows an idle connection, opens one
only while fewer than `size` exist, and otherwise waits for the next one given
back (a caller's wait is one insert's round trip; a handshake costs more).
`pgkick.connections.linger` is this pool with one connection and no wait.

The rules are the lingering core's (`pgkick.connections.idle`): reused while calls
come, closed by the closer thread `linger` seconds after its last use, discarded if
the server spoke while it sat idle or a call left it broken or inside a
transaction, the most recent lent first, a forked child's pool forgotten.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pgkick.connections.db import Connection, connect, no_transaction
from pgkick.connections.idle import (
    APPLICATION_NAME,
    DEFAULT_LINGER_SECONDS,
    DEFAULT_SIZE,
    IdleConnections,
    keep_after_error,
    server_spoke,
)

__all__ = ["APPLICATION_NAME", "DEFAULT_SIZE", "LingeringPool", "close_all", "shared"]


class LingeringPool:
    """Up to `size` reusable connections to one DSN; `linger` 0 means one new connection a
    call. `overflow`: a caller that finds every connection lent opens one of its own for
    that call (closed after it) instead of waiting."""

    def __init__(
        self,
        dsn: str,
        linger: float = DEFAULT_LINGER_SECONDS,
        size: int = DEFAULT_SIZE,
        *,
        clock: Callable[[], float] = time.monotonic,
        closer: bool = True,
        overflow: bool = False,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.dsn = dsn
        self.linger = linger
        self.closer = closer  # tests drive close_if_idle() themselves with an injected clock
        self.overflow = overflow
        self.on_close = on_close
        self._core = IdleConnections[Connection](linger, size, clock)
        self._cond = threading.Condition()
        self._closing = False  # a closer thread is running
        _pools.add(self)

    @property
    def opened(self) -> int:
        """Connections made, for tests and the benchmark."""
        return self._core.opened

    @property
    def size(self) -> int:
        return self._core.size

    def _forget(self) -> None:
        """In a forked child: the parent's connections are not ours (never closed here)."""
        self._core.forget()
        self._cond = threading.Condition()
        self._closing = False

    @contextmanager
    def connection(self, retries: int = 0) -> Iterator[Connection]:
        """An autocommit connection for one call; given back for the next one if it is clean."""
        conn = None if self.linger <= 0 else self._take(retries)
        if conn is None:  # no lingering, or every connection lent and overflow allowed
            with self._cond:
                self._core.opened += 1
            with connect(self.dsn, retries=retries, application_name=APPLICATION_NAME) as own:
                yield own
            return
        keep = True
        try:
            yield conn
        except BaseException:
            keep = keep_after_error(conn.broken, no_transaction(conn))
            if not keep:
                self._close(conn)
            raise
        finally:
            self._give_back(conn if keep else None)

    def close_if_idle(self) -> bool:
        """Close connections unused for `linger` seconds; True if none is open now."""
        with self._cond:
            for conn in self._core.take_expired():
                self._close(conn)
            return self._core.empty

    def close(self) -> None:
        """Close the idle connections now (a lent one lingers again once given back)."""
        with self._cond:
            for conn in self._core.take_expired(older_than=float("-inf")):
                self._close(conn)

    def _close(self, conn: Connection) -> None:
        conn.close()
        if self.on_close:
            self.on_close()

    def _take(self, retries: int) -> Connection | None:
        with self._cond:
            self._core.forked()  # forked without the at-fork hook (not expected)
            while True:
                conn, dropped = self._core.take_idle(lambda c: not c.closed and not server_spoke(c))
                for gone in dropped:
                    self._close(gone)
                if conn is not None:
                    return conn
                if self._core.take_slot():
                    break  # a slot for the connection opened below, unlocked
                if self.overflow:
                    return None
                self._cond.wait()
        try:
            return connect(self.dsn, retries=retries, application_name=APPLICATION_NAME)
        except BaseException:
            self._give_back(None)
            raise

    def _give_back(self, conn: Connection | None) -> None:
        with self._cond:
            self._core.give_back(conn if conn is not None and not conn.closed else None)
            self._cond.notify()
            if self._core.idle and self.closer and not self._closing:
                self._closing = True
                threading.Thread(target=self._close_when_idle, daemon=True).start()

    def _close_when_idle(self) -> None:
        """The closer thread: runs while some connection is idle, ends with the last one."""
        while True:
            with self._cond:
                self.close_if_idle()
                deadline = self._core.next_deadline()
                if deadline is None:
                    self._closing = False
                    return
                pause = max(deadline - self._core.clock(), self.linger / 10)
            time.sleep(pause)


_pools: weakref.WeakSet[LingeringPool] = weakref.WeakSet()
_shared: dict[tuple[type[LingeringPool], str], LingeringPool] = {}
_shared_lock = threading.Lock()


def shared(dsn: str, linger: float) -> LingeringPool:
    """The process's producer pool for this DSN (made on first use)."""
    return shared_of(LingeringPool, dsn, linger)


def shared_of[P: LingeringPool](kind: type[P], dsn: str, linger: float) -> P:
    """The process's pool of this kind (a pool, or pgkick.connections.linger's single
    connection) for this DSN, made on first use."""
    with _shared_lock:
        pool = _shared.get((kind, dsn))
        if not isinstance(pool, kind) or pool.linger != linger:
            if pool is not None:
                pool.close()
            pool = kind(dsn, linger)
            _shared[(kind, dsn)] = pool
        return pool


def opened_total() -> int:
    """Connections the process's shared pools have opened so far (the benchmark's)."""
    with _shared_lock:
        return sum(pool.opened for pool in _shared.values())


@atexit.register
def close_all() -> None:
    """Close every shared pool's idle connections now (at exit, or when an app wants it)."""
    with _shared_lock:
        for pool in _shared.values():
            if not pool._core.forked():
                pool.close()
        _shared.clear()


def _after_fork_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    for pool in list(_pools):
        pool._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)
