"""The asyncio producer's connections: a few per event loop, closed soon after their last use.

Why its own face: an AsyncConnection belongs to the event loop that made it, so
the threads' pool (`pgkick.connections.pool`) cannot lend one. The rules are the
lingering core's (`pgkick.connections.idle`), the same as the threads': concurrent
tasks borrow an idle connection, open one only while fewer than `size` exist,
otherwise wait (without blocking the loop) for one given back; each connection is
closed PGKICK_PRODUCER_LINGER_MS after its last use, by a timer on the loop, or when
the loop shuts down its async generators first (asyncio.run's end), so no session stays
open without work; a forked child forgets its parent's pools.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager

from pgkick.connections.aio_db import AsyncConnection, async_state, connect_producer_async
from pgkick.connections.idle import (
    APPLICATION_NAME,
    DEFAULT_SIZE,
    IdleConnections,
    keep_after_error,
    server_spoke,
)


class AsyncLingeringPool:
    """Up to `size` asyncio connections to one DSN, on the loop running when it was made."""

    def __init__(self, dsn: str, linger: float, size: int = DEFAULT_SIZE) -> None:
        self.dsn = dsn
        self.linger = linger
        self._loop = asyncio.get_running_loop()
        self._core = IdleConnections[AsyncConnection](linger, size, self._loop.time)
        self._cond = asyncio.Condition()
        self._timer: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._loop_end: AsyncGenerator[None] | None = None

    @property
    def opened(self) -> int:
        return self._core.opened

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """An autocommit connection for one call; given back for the next one if clean."""
        if self.linger <= 0:
            self._core.opened += 1
            conn = await connect_producer_async(self.dsn, APPLICATION_NAME)
            try:
                yield conn
            finally:
                await conn.close()
            return
        conn = await self._take()
        keep = True
        try:
            yield conn
        except BaseException:
            idle, _, broken = async_state(conn)
            keep = keep_after_error(broken, idle)
            if not keep:
                await conn.close()
            raise
        finally:
            await self._give_back(conn if keep else None)

    async def close_idle(self, older_than: float = 0.0) -> None:
        """Close the idle connections unused for `older_than` seconds or more."""
        async with self._cond:
            old = self._core.take_expired(older_than)
        for conn in old:
            await conn.close()
        self._arm()

    async def _take(self) -> AsyncConnection:
        if self._loop_end is None:  # the loop's end closes what is left (_until_loop_ends)
            self._loop_end = self._until_loop_ends()
            await anext(self._loop_end)
        async with self._cond:
            while True:
                # as the threads' pool: a connection the server spoke on while it sat idle
                # (it closed it: an idle timeout, a restart, a compute suspended) is dropped,
                # not lent to fail the caller's enqueue
                conn, dropped = self._core.take_idle(
                    lambda c: not c.closed and not async_state(c)[2] and not server_spoke(c)
                )
                for gone in dropped:
                    await gone.close()
                if conn is not None:
                    return conn
                if self._core.take_slot():
                    break
                try:
                    await self._cond.wait()
                except BaseException:
                    # The wake-up a give-back sent may have been this caller's, cancelled
                    # before it resumed (a request timeout): before Python 3.13 it dies
                    # with it (CPython gh-112202), and the next caller waited, a
                    # connection idle, until some other call gave one back (a review,
                    # 2026-12-05). Passed on; a caller woken for nothing looks again.
                    self._cond.notify()
                    raise
        try:
            return await connect_producer_async(self.dsn, APPLICATION_NAME)
        except BaseException:
            await self._give_back(None)
            raise

    async def _give_back(self, conn: AsyncConnection | None) -> None:
        async with self._cond:
            self._core.give_back(conn if conn is not None and not conn.closed else None)
            self._cond.notify()
        self._arm()

    async def _until_loop_ends(self) -> AsyncGenerator[None]:
        """Suspended for the pool's life; closed by the loop's shutdown_asyncgens (its last
        turn under asyncio.run, asyncio.Runner, asgiref), which closes the connections.

        Why: the linger timer dies with its loop. A loop ended before it fired (asyncio.run
        per Lambda invocation or Celery task, async_to_sync per call) left its connections
        open for the life of the process, the pool kept in `_pools` (a review, 2026-12-05).
        The loop holds an async generator it has started until it shuts them down; one
        that never does (run_until_complete alone) still needs close_all()."""
        try:
            yield
        finally:
            if not self._core.forked():  # a child's copy: the connections are the parent's
                await self._close_at_loop_end()

    async def _close_at_loop_end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pools = _pools.get(self._loop, {})
        if pools.get(self.dsn) is self:
            del pools[self.dsn]  # the loop may go now
        await self.close_idle()

    def _arm(self) -> None:
        """One timer per pool: at the oldest idle connection's deadline, close what is due."""
        due = self._core.next_deadline()
        if self._timer is None and due is not None:
            self._timer = self._loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        task = self._loop.create_task(self.close_idle(self.linger))
        self._closing.add(task)  # a reference, so the task is not collected midway
        task.add_done_callback(self._closing.discard)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AsyncLingeringPool]] = (
    weakref.WeakKeyDictionary()
)
_pid = os.getpid()


def shared(dsn: str, linger: float) -> AsyncLingeringPool:
    """The running loop's producer pool for this DSN (made on first use)."""
    global _pid
    if _pid != os.getpid():  # a forked child: the parent's connections are not ours
        _pools.clear()
        _pid = os.getpid()
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    pool = pools.get(dsn)
    if pool is None or pool.linger != linger:
        pool = pools[dsn] = AsyncLingeringPool(dsn, linger)
    return pool


async def close_all() -> None:
    """Close the running loop's idle producer connections now (an app's shutdown hook)."""
    for pool in list(_pools.get(asyncio.get_running_loop(), {}).values()):
        await pool.close_idle()
