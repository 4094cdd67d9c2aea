"""The asyncio enqueuer: jobs inserted on one AsyncConnection, remembered to be kicked
after the commit. Why apart from pgkick.aio: the joined form (pgkick.producer.aio_joined,
`pgkick.aio.enqueue_in`) builds on it too, and pgkick.aio holds the public forms; it is
re-exported there as `pgkick.aio.AsyncEnqueuer`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Unpack

from pgkick import config
from pgkick.connections.aio_db import AsyncConnection
from pgkick.connections.db import Clock
from pgkick.connections.schema_advice import schema_advice
from pgkick.producer.enqueue import INSERT_CHUNK
from pgkick.producer.options import EnqueueOptions
from pgkick.producer.plan import EnqueuePlan, execute_async, job_specs
from pgkick.store import bulk, dependencies, unique
from pgkick.store.producer import QueuedJob
from pgkick.store.statement import Steps, drive_async, rows_async


class AsyncEnqueuer:
    """Inserts jobs on one AsyncConnection; remembers them so they are kicked after commit."""

    def __init__(self, conn: AsyncConnection, clock: Clock, max_payload_bytes: int) -> None:
        self.conn = conn
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes
        self.queued: list[QueuedJob] = []

    @schema_advice  # no schema: say to migrate
    async def enqueue(self, payload: Any, *, task: str, **options: Unpack[EnqueueOptions]) -> int:
        """Insert one job (a live job holding its unique key is answered, not kicked again)."""
        plan = EnqueuePlan.build(payload, task, options, max_payload_bytes=self.max_payload_bytes)
        return await self.enqueue_plan(plan)

    async def enqueue_plan(self, plan: EnqueuePlan) -> int:
        """Insert one planned job (and link it to its parents, `after=`: the parents'
        check, the insert and the link in one transaction, a savepoint in the app's)."""
        after = plan.spec.after
        if after:
            async with self.atomic():
                await self._drive(dependencies.checked([after], config.app_settings().schema))
                job, inserted = await execute_async(self.conn, self.clock, plan)
                linked = dependencies.linked([job.id], [after]) if inserted else None
                waiting = await self._drive(linked) if linked else set()
            if inserted and job.id not in waiting:  # a waiting job is kicked by its last parent
                self.queued.append(job)
            return job.id
        job, inserted = await execute_async(self.conn, self.clock, plan)
        if inserted:
            self.queued.append(job)
        return job.id

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """The calls inside written together or not at all (a workflow's levels): a
        savepoint in the app's transaction; rolled back, their jobs are not kicked."""
        kept = len(self.queued)
        try:
            async with self.atomic():
                yield
        except BaseException:
            del self.queued[kept:]
            raise

    @schema_advice  # no schema: say to migrate
    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Each mapping holds enqueue's arguments; all validated before any is sent. One
        savepoint in the app's transaction: a batch refused half way (an unknown parent, a
        key that kept changing) leaves none of its jobs, as the sync form (it left the
        first ones, unkicked, one of them linked to no parent: a review, 2026-12-05)."""
        specs = job_specs(list(enumerate(jobs)), self.max_payload_bytes)
        batch = unique.UniqueBatch()  # keyed jobs wait, deduplicated, for the plain ones
        async with self.atomic():
            for chunk in itertools.batched(specs, INSERT_CHUNK):
                for plain in bulk.sized(batch.split(chunk)):  # runs one statement can carry
                    inserted_rows = await rows_async(self.conn, self.clock, bulk.insert_many(plain))
                    batch.took_plain(plain, inserted_rows)
            every, inserted = await drive_async(self.conn, self.clock, batch.insert_keyed())
            children, parents = dependencies.new_pairs(
                [row[0] for row in every], [row[0] for row in inserted], [s.after for s in specs]
            )
            waiting: set[int] = set()
            if children:  # an unknown parent rolls the batch back
                await self._drive(dependencies.checked(parents, config.app_settings().schema))
                waiting = await self._drive(dependencies.linked(children, parents))
        # a skipped duplicate is not kicked again, nor a waiting job (its last parent is)
        self.queued.extend(QueuedJob._make(r) for r in inserted if r[0] not in waiting)
        return [row[0] for row in every]

    def atomic(self) -> AbstractAsyncContextManager[Any]:
        """Its statements together or none: a transaction of its own, or a savepoint in
        the app's (the joined form, pgkick.producer.aio_joined, opens the app's first)."""
        return self.conn.transaction()

    async def _drive[T](self, steps: Steps[T]) -> T:
        return await drive_async(self.conn, self.clock, steps)
