"""The producer's connections under threads: a few, shared, each closed soon after its last use.

Why a pool and not one connection: with one lingering connection, a thread that
found it busy opened a connection of its own for that call (a TCP + SCRAM
handshake, and on a serverless database a session): 8 threads opened ~1,900
sessions for 4,000 jobs. Here a thread borrows an idle connection, opens one
only while fewer than `size` exist, and otherwise waits for the next one given
back (a caller's wait is one insert's round trip; a handshake costs more).

The rules of `pgkick.connections.linger` still hold for each connection: reused while calls
come, closed by the closer thread `linger` seconds after its last use (so no
session stays open without work), discarded if the server spoke while it sat
idle or if a call left it broken or inside a transaction. The most recently
used connection is lent first, so connections a burst needed and a trickle does
not go idle and close. A forked child forgets the parent's connections without
closing them (psycopg never ends a session from another process) and opens its own.
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
from pgkick.connections.linger import (
    APPLICATION_NAME,
    DEFAULT_LINGER_SECONDS,
    register_source,
    server_spoke,
)
from pgkick.errors import InvalidArgument

DEFAULT_SIZE = 4  # measured: 8 and 16 threads gain nothing from more (their enqueues are grouped)


class LingeringPool:
    """Up to `size` reusable connections to one DSN; `linger` 0 means one new connection a call."""

    def __init__(
        self,
        dsn: str,
        linger: float = DEFAULT_LINGER_SECONDS,
        size: int = DEFAULT_SIZE,
        *,
        clock: Callable[[], float] = time.monotonic,
        closer: bool = True,
    ) -> None:
        if size < 1:
            raise InvalidArgument(f"size: a pool needs at least one connection, got {size}")
        self.dsn = dsn
        self.linger = linger
        self.size = size
        self.clock = clock
        self.closer = closer  # tests drive close_if_idle() themselves with an injected clock
        self.opened = 0  # connections made, for tests and the benchmark
        self._forget()
        _pools.add(self)

    def _forget(self) -> None:
        """Start empty (at creation, and in a forked child: the parent's are not ours)."""
        self._idle: list[tuple[Connection, float]] = []  # (connection, last use), newest last
        self._lent = 0
        self._cond = threading.Condition()
        self._closing = False  # a closer thread is running
        self._pid = os.getpid()

    @contextmanager
    def connection(self, retries: int = 0) -> Iterator[Connection]:
        """An autocommit connection for one call; given back for the next one if it is clean."""
        if self.linger <= 0:
            with self._cond:
                self.opened += 1
            with connect(self.dsn, retries=retries, application_name=APPLICATION_NAME) as own:
                yield own
            return
        conn = self._take(retries)
        keep = True
        try:
            yield conn
        except BaseException:
            if conn.broken or not no_transaction(conn):
                conn.close()
                keep = False
            raise
        finally:
            self._give_back(conn if keep else None)

    def close_if_idle(self) -> bool:
        """Close connections unused for `linger` seconds; True if none is open now."""
        with self._cond:
            now = self.clock()
            keep = [(c, used) for c, used in self._idle if now - used < self.linger]
            for conn, used in self._idle:
                if now - used >= self.linger:
                    conn.close()
            self._idle = keep
            return not self._idle and not self._lent

    def close(self) -> None:
        """Close the idle connections now (lent ones close when given back after this)."""
        with self._cond:
            for conn, _ in self._idle:
                conn.close()
            self._idle = []

    def _take(self, retries: int) -> Connection:
        with self._cond:
            if self._pid != os.getpid():  # forked without the at-fork hook (not expected)
                self._forget()
            while True:
                while self._idle:
                    conn, _ = self._idle.pop()
                    if not conn.closed and not server_spoke(conn):
                        self._lent += 1
                        return conn
                    conn.close()
                if self._lent < self.size:
                    self._lent += 1  # a slot for the connection opened below, unlocked
                    self.opened += 1
                    break
                self._cond.wait()
        try:
            return connect(self.dsn, retries=retries, application_name=APPLICATION_NAME)
        except BaseException:
            self._give_back(None)
            raise

    def _give_back(self, conn: Connection | None) -> None:
        with self._cond:
            self._lent -= 1
            if conn is not None and not conn.closed:
                self._idle.append((conn, self.clock()))
            self._cond.notify()
            if self._idle and self.closer and not self._closing:
                self._closing = True
                threading.Thread(target=self._close_when_idle, daemon=True).start()

    def _close_when_idle(self) -> None:
        """The closer thread: runs while some connection is idle, ends with the last one."""
        while True:
            with self._cond:
                self.close_if_idle()
                if not self._idle:
                    self._closing = False
                    return
                oldest = min(used for _, used in self._idle)
                pause = max(oldest + self.linger - self.clock(), self.linger / 10)
            time.sleep(pause)


_pools: weakref.WeakSet[LingeringPool] = weakref.WeakSet()
_shared: dict[str, LingeringPool] = {}
_shared_lock = threading.Lock()


def shared(dsn: str, linger: float) -> LingeringPool:
    """The process's producer pool for this DSN (made on first use)."""
    with _shared_lock:
        pool = _shared.get(dsn)
        if pool is None or pool.linger != linger:
            if pool is not None:
                pool.close()
            pool = _shared[dsn] = LingeringPool(dsn, linger)
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
            if pool._pid == os.getpid():
                pool.close()
        _shared.clear()


def _after_fork_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    for pool in list(_pools):
        pool._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)
register_source(opened_total, close_all)  # linger.close_all and the counts see pools
