"""What a worker or reaper invocation needs, assembled once per execution environment.

Why a composition root: the handlers stay three lines (parse, call, return),
the loop and the reaper stay testable with any store and kicker, and the slow
parts (settings, task imports, AWS clients) happen at cold start, while the
database is used only inside an invocation, on a connection closed before it
returns (an open idle connection keeps a serverless database awake). The one
connection a cold start opens (pgkick.worker.cold_start) is the first invocation's,
taken by it or closed when it ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any

from pgkick import config
from pgkick.connections import linger
from pgkick.connections.db import Database
from pgkick.connections.early import EarlyConnection
from pgkick.errors import BadEvent
from pgkick.kick.default import default_kicker, make_kicker
from pgkick.kick.kickers import Kicker, KickEvent, parse_kick_event
from pgkick.store import migrations as schema
from pgkick.store.worker import WorkerStore
from pgkick.tasks.registry import Registry, registry
from pgkick.worker.loop import Summary, Worker, WorkerOptions
from pgkick.worker.rescue import rescue_queue

log = logging.getLogger("pgkick.runtime")
FLUSH_MARGIN_SECONDS = 0.5  # kept to answer in, after the wake-ups are booked
FLUSH_MAX_SECONDS = 30.0
# Kicks no producer sent: Scheduler's wake-ups (run_at's, and every kick's safety a minute
# later, pgkick.kick.safety) and a dead worker's rescue. One that finds nothing leaves at
# once: lingering on it (PGKICK_WORKER_LINGER_MS) billed the linger for each kick's safety
# and held its session, and a flowing queue has its own lingering worker already.
TIMED_REASONS = frozenset({"wake", "rescue"})

__all__ = ["BadEvent", "KickEvent", "Runtime", "default_kicker", "make_kicker", "parse_kick_event"]


class RecentQueues:
    """Queues whose last kick in this execution environment was a one-off (pgkick.kick.watch):
    seen again within `window` seconds, they have a flow, and the worker lingers on them."""

    def __init__(self, window: float = 60.0, size: int = 4096) -> None:
        self.window, self.size = window, size
        self._seen: dict[str, float] = {}

    def flows(self, queue: str) -> bool:
        now = time.monotonic()
        seen = self._seen.pop(queue, None)
        self._seen[queue] = now  # newest last; the oldest go first when full
        if len(self._seen) > self.size:
            del self._seen[next(iter(self._seen))]
        return seen is not None and now - seen < self.window


class Runtime:
    def __init__(
        self,
        settings: config.Settings,
        kicker: Kicker,
        *,
        dsn: Callable[[], str] = config.database_url,
        tasks: Registry = registry,
        early: EarlyConnection | None = None,
    ) -> None:
        self.settings = settings
        self.kicker = kicker
        self.dsn = dsn
        self.tasks = tasks
        self.early = early  # the cold start's connection, opening while the tasks import
        self.tasks.load(settings.task_modules)
        self._schema_checked = False
        self.recent = RecentQueues()

    @classmethod
    def from_env(cls, early: EarlyConnection | None = None) -> Runtime:
        """`early`: the connection the handler started opening at its cold start
        (pgkick.worker.cold_start), taken by the first invocation that connects."""
        settings = config.Settings.from_env()
        return cls(settings, make_kicker(settings), early=early)

    def end_invocation(self) -> None:
        """Close what an invocation may leave open: the cold start's connection, when the
        first invocation needed none (a rejected event). Lambda freezes the environment
        after the answer, and a frozen open session keeps a serverless database awake."""
        early, self.early = self.early, None
        if early is not None:
            early.close()

    def drain(
        self, queue: str, remaining_ms: Callable[[], int], *, hop: int = 0, reason: str = "manual"
    ) -> Summary:
        """Drain one queue. The lease outlasts this invocation (remaining time + a margin),
        so the reaper can never hand a job to a second worker while this one still lives.

        Whatever the tasks opened (a follow-up enqueue's lingering producer connection)
        is closed before returning: Lambda freezes the environment after the answer,
        and a frozen open session would keep a serverless database awake.

        A `rescue` (a dead worker's switch, pgkick.worker.rescue) first re-queues the queue's
        expired leases."""
        margin = self.settings.lease_margin
        lease = max(self.settings.lease, timedelta(milliseconds=remaining_ms()) + margin)
        options = WorkerOptions(
            batch=self.settings.batch,
            lease=lease,
            min_remaining=self.settings.min_remaining,
            max_fanout=self.settings.max_fanout,
            fanout_after=self.settings.fanout_after,
            backoff=self.settings.backoff,
            backoff_cap=self.settings.backoff_cap,
            linger=self.settings.worker_linger,
            listen=self.settings.worker_listen,
            watch_ttl=self.settings.watch_ttl,
            max_hops=self.settings.max_hops,
            kick_pending=config.kick_pending(),
            kick_safety=config.kick_safety(),
            failed_kick_wake=config.failed_kick_wake(),
        )
        try:
            with self._store(WorkerStore) as store:
                rescued = rescue_queue(store, self.kicker, queue) if reason == "rescue" else []
                worker = Worker(store, self.tasks, self.kicker, options)
                worker.flows = self.recent.flows
                worker.timed = reason in TIMED_REASONS
                summary = worker.drain(queue, remaining_ms, hop=hop)
                summary.rescued = len(rescued)
                return summary
        finally:
            linger.close_all()
            self._flush_wakes(remaining_ms)

    def _flush_wakes(self, remaining_ms: Callable[[], int]) -> None:
        """Book the wake-ups noted in the background (pgkick.kick.bookings) before the
        handler answers: Lambda freezes the environment then, and the booking thread with
        it. Bounded by the time left, less a margin to answer in."""
        flush = getattr(self.kicker, "flush", None)
        if flush is not None:
            left = remaining_ms() / 1000 - FLUSH_MARGIN_SECONDS
            if not flush(max(0.0, min(left, FLUSH_MAX_SECONDS))):
                log.warning("wake-ups still being booked as the invocation ends")

    def tick(self, event: Mapping[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any]:
        """A periodic schedule fired: insert its tick's job (once per tick), drain its queue.

        Schedules are imported here (an app that declares one imported them with its tasks):
        a kick's cold start does not pay for cron expressions and time zones."""
        from pgkick.tasks.recurring import parse_tick, periodic_registry

        name, tick_at = parse_tick(event)
        declared = periodic_registry.get(name)
        if declared is None:  # removed from code, schedule not yet synced: nothing to run
            return {"rejected": f"periodic {name!r} is not declared in PGKICK_TASKS' modules"}
        with self._store(WorkerStore) as store:
            job_id = store.enqueue_tick(
                name,
                tick_at,
                queue=declared.queue,
                task=declared.task,
                payload=declared.payload_json,
                attempts=declared.max_attempts,
            )
        summary = self.drain(declared.queue, remaining_ms)
        return {"periodic": name, "tick": tick_at.isoformat(), "job": job_id, **summary.as_dict()}

    def reap(
        self,
        remaining_ms: Callable[[], int] | None = None,
        on_health: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """One reaper run: reports (on_health) first, then purges while remaining_ms leaves
        time (pgkick.worker.reaper); the wake-ups it booked are sent before it answers.

        The reaper's modules are imported here, not at the top: the worker Lambda shares
        this module and should not pay for them at each cold start."""
        from pgkick.store.maintenance import MaintenanceStore
        from pgkick.worker.reaper import reap

        try:
            with self._store(MaintenanceStore) as store:
                return reap(
                    store,
                    self.kicker,
                    retention=self.settings.retention,
                    remaining_ms=remaining_ms,
                    on_health=on_health,
                )
        finally:
            self._flush_wakes(remaining_ms or (lambda: 60_000))

    @contextmanager
    def _store[S: Database](self, role: type[S]) -> Iterator[S]:
        """A connection for one invocation, closed before it returns; schema checked once.
        `role`: the worker's store for a drain or a tick, the maintenance store to reap.
        (A password refused after a rotation is read again by `connect`.)"""
        with self._connected(role) as store:
            if not self._schema_checked:
                schema.check(store)
                self._schema_checked = True
            yield store

    @contextmanager
    def _connected[S: Database](self, role: type[S]) -> Iterator[S]:
        """The cold start's connection (its schema checked, or its error raised here), else
        a new one; either closed on exit."""
        early, self.early = self.early, None
        conn = early.take() if early is not None else None
        if conn is None:
            with self._open(role, self.dsn()) as store:
                yield store
            return
        self._schema_checked = True
        try:
            yield role(conn, schema=self.settings.schema)
        finally:
            conn.close()

    def _open[S: Database](self, role: type[S], dsn: str) -> AbstractContextManager[S]:
        """A new connection to `dsn` with the worker's schema and connect retries."""
        return role.open(dsn, schema=self.settings.schema, retries=self.settings.connect_retries)
