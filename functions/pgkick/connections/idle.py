"""The lingering core: which connections sit idle and since when, how many are lent, and
which process they belong to. The faces (pgkick.connections.linger: one connection;
pool: a few, for threads; aio_pool: a few, for an event loop) lock, connect and close.

Why one core: the three faces keep the same promise, and it used to be written three
times. A connection is reused while calls come, so an app does not pay a TCP and
SCRAM handshake (~5 ms) per enqueue; it is closed `linger` seconds after its last use,
far inside any idle-suspend window, so no session stays open without work; the most
recently used one is lent first, so connections a burst needed and a trickle does not
go idle and close; a connection the server spoke on while it sat idle (a terminated
backend, a suspended compute) is dropped before use, and one a call left broken or
inside a transaction is never lent again; a forked child forgets its parent's
connections without closing them (closing would end the parent's sessions).

No locks and no I/O here: a thread's face holds a threading.Condition around these
calls, the event loop's an asyncio.Condition, and each closes what it is handed.
"""

from __future__ import annotations

import os
import select
from collections.abc import Callable
from typing import Any

from pgkick.errors import InvalidArgument

APPLICATION_NAME = "pgkick-producer"
DEFAULT_LINGER_SECONDS = 1.0
DEFAULT_SIZE = 4  # measured: 8 and 16 threads gain nothing from more (their enqueues are grouped)


class IdleConnections[C]:
    """Up to `size` connections: the idle ones (newest last, each with its last use) and
    how many are lent; `opened` counts the connections made, for tests and the benchmark."""

    def __init__(self, linger: float, size: int, clock: Callable[[], float]) -> None:
        if size < 1:
            raise InvalidArgument(f"size: a pool needs at least one connection, got {size}")
        self.linger = linger
        self.size = size
        self.clock = clock
        self.opened = 0
        self.forget()

    def forget(self) -> None:
        """Start empty (at creation, and in a forked child: the parent's are not ours)."""
        self.idle: list[tuple[C, float]] = []
        self.lent = 0
        self.pid = os.getpid()

    def forked(self) -> bool:
        """True (and forgotten) in a child forked since these connections were made."""
        if self.pid == os.getpid():
            return False
        self.forget()
        return True

    def take_idle(self, usable: Callable[[C], bool]) -> tuple[C | None, list[C]]:
        """The newest usable idle connection, now lent (or None), and the unusable ones
        met on the way, taken out for the caller to close."""
        dropped: list[C] = []
        while self.idle:
            conn, _ = self.idle.pop()
            if usable(conn):
                self.lent += 1
                return conn, dropped
            dropped.append(conn)
        return None, dropped

    def take_slot(self) -> bool:
        """True, and a slot lent, if one more connection may be opened (fewer than `size`)."""
        if self.lent >= self.size:
            return False
        self.lent += 1
        self.opened += 1
        return True

    def give_back(self, conn: C | None) -> None:
        """A lent connection (or slot) is back: idle from now, or gone (None)."""
        self.lent -= 1
        if conn is not None:
            self.idle.append((conn, self.clock()))

    def take_expired(self, older_than: float | None = None) -> list[C]:
        """The idle connections unused for `older_than` seconds (`linger` by default),
        taken out for the caller to close."""
        age = self.linger if older_than is None else older_than
        now = self.clock()
        expired = [conn for conn, used in self.idle if now - used >= age]
        self.idle = [(conn, used) for conn, used in self.idle if now - used < age]
        return expired

    def next_deadline(self) -> float | None:
        """When the oldest idle connection expires (None: nothing idle)."""
        return min(used for _, used in self.idle) + self.linger if self.idle else None

    @property
    def empty(self) -> bool:
        return not self.idle and not self.lent


def keep_after_error(broken: bool, idle: bool) -> bool:
    """Whether a connection a call raised on may be lent again: a failed statement leaves
    it usable, a broken one or one left inside a transaction is closed."""
    return not broken and idle


def server_spoke(conn: Any) -> bool:
    """An idle connection has nothing to say; readable means the server closed it.

    Why poll and not select: select() refuses a descriptor past FD_SETSIZE (1,024), and
    that refusal read as "closed" made a process with many open files (a busy web server)
    drop its idle connection before every call, opening one per enqueue (a review, F2).
    select() is kept only where poll() is missing (Windows)."""
    try:
        fd = conn.fileno()
        if not hasattr(select, "poll"):
            return bool(select.select([fd], [], [], 0)[0])
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True
