"""`pgkick.wait_async`: `pgkick.wait` for an asyncio app, awaited without blocking its loop.

Why a twin: `pgkick.wait` pauses with time.sleep and reads on a synchronous connection, so
in a coroutine it stops every other task of the loop for up to its timeout. Here each look
is a read on one of the loop's own lingering connections (pgkick.connections.aio_pool, as
`pgkick.aio`'s enqueues), taken only for that look, and each pause an `await
asyncio.sleep`. The rules are the sync one's (pgkick.tasks.results): its arguments refused
before anything connects, its cadence (50 ms doubling to 1 s), its timeout (0..900 s, then
TimeoutError), JobFailed at once for a failed job, JobNotFound, RoleRefused.

Why not `pgkick.aio.wait`: pgkick.aio sits below the tasks in the layers
(tests/test_layout.py), and these rules live with the tasks' results; the `_async` suffix
is the twin's name there, as `Task.enqueue_many_async` and `Workflow.enqueue_async`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pgkick import config
from pgkick.connections import aio_pool
from pgkick.connections.db import server_clock
from pgkick.connections.schema_advice import schema_advice
from pgkick.store.producer import Outcome, outcome_of
from pgkick.store.statement import rows_async
from pgkick.tasks.results import FIRST_PAUSE, MAX_PAUSE, check_wait, found, refused, settled


@schema_advice  # no schema: say to migrate
async def wait_async(
    job_id: int,
    *,
    timeout: float,
    dsn: str | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Any:
    """Look at the job until it is done (its result) or failed (JobFailed), for at most
    `timeout` seconds (then TimeoutError), pausing 50 ms to 1 s between looks without
    blocking the event loop."""
    check_wait(job_id, timeout)
    deadline = monotonic() + timeout
    pause = FIRST_PAUSE
    while True:  # pgkick.tasks.results.looked_until's cadence, awaited
        look = await _look(job_id, dsn)
        if look[0] in ("done", "failed"):
            return settled(job_id, look)
        left = deadline - monotonic()
        if left <= 0:
            raise TimeoutError(f"job {job_id} still {look[0]} after {timeout} s")
        await sleep(min(pause, left))
        pause = min(pause * 2, MAX_PAUSE)


async def _look(job_id: int, dsn: str | None) -> tuple[str, Any, str | None]:
    settings = config.app_settings()
    shared = aio_pool.shared(dsn or settings.dsn(), settings.producer_linger)
    async with shared.connection() as conn:
        try:
            rows = await rows_async(conn, server_clock, outcome_of(job_id))
        except Exception as exc:  # the read alone: a refused connection says so itself
            error = refused(job_id, exc)
            if error is exc:
                raise
            raise error from exc
    return found(job_id, Outcome(*rows[0]) if rows else None)
