"""What a worker or reaper invocation needs, assembled once per execution environment.

Why a composition root: the handlers stay three lines (parse, call, return),
the loop and the reaper stay testable with any store and kicker, and the slow
parts (settings, task imports, AWS clients) happen at cold start, while the
database is touched only inside an invocation, on a connection closed before it
returns (an open idle connection keeps a serverless database awake).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from pgkick import config, linger, schema
from pgkick.kick import BadEvent, Kicker, KickEvent, LambdaKicker, NoKicker, parse_kick_event
from pgkick.reaper import reap
from pgkick.rescue import rescue_queue
from pgkick.store import JobStore
from pgkick.tasks import Registry, registry
from pgkick.worker import Summary, Worker, WorkerOptions

__all__ = ["BadEvent", "KickEvent", "Runtime", "default_kicker", "make_kicker", "parse_kick_event"]


def make_kicker(settings: config.Settings, env: Mapping[str, str] | None = None) -> Kicker:
    env = os.environ if env is None else env
    if settings.kicker == "none":
        return NoKicker()
    if settings.kicker == "lambda":
        assert settings.worker_function is not None
        return LambdaKicker(
            settings.worker_function,
            function_arn=settings.worker_arn,
            scheduler_role_arn=settings.scheduler_role_arn,
            schedule_group=settings.schedule_group,
            timeout=settings.aws_timeout,
        )
    if env.get("PGKICK_LOCAL_PIPE_FD"):  # inside a local environment: report to the parent
        from pgkick.local_env import PipeKicker

        return PipeKicker(int(env["PGKICK_LOCAL_PIPE_FD"]))
    from pgkick.local import LocalKicker

    return LocalKicker(concurrency=settings.local_concurrency)


_default: Kicker | None = None
_default_lock = threading.Lock()


def default_kicker() -> Kicker:
    """The process-wide kicker that PGKICK_KICKER selects, made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = make_kicker(config.Settings.from_env())
        return _default


class Runtime:
    def __init__(
        self,
        settings: config.Settings,
        kicker: Kicker,
        *,
        dsn: Callable[[], str] = config.database_url,
        tasks: Registry = registry,
    ) -> None:
        self.settings = settings
        self.kicker = kicker
        self.dsn = dsn
        self.tasks = tasks
        self.tasks.load(settings.task_modules)
        self._schema_checked = False

    @classmethod
    def from_env(cls) -> Runtime:
        settings = config.Settings.from_env()
        return cls(settings, make_kicker(settings))

    def drain(
        self, queue: str, remaining_ms: Callable[[], int], *, hop: int = 0, reason: str = "manual"
    ) -> Summary:
        """Drain one queue. The lease outlasts this invocation (remaining time + a margin),
        so the reaper can never hand a job to a second worker while this one still lives.

        Whatever the tasks opened (a follow-up enqueue's lingering producer connection)
        is closed before returning: Lambda freezes the environment after the answer,
        and a frozen open session would keep a serverless database awake.

        A `rescue` (a dead worker's switch, pgkick.rescue) first re-queues the queue's
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
            watch_ttl=self.settings.watch_ttl,
            max_hops=self.settings.max_hops,
        )
        try:
            with self._store() as store:
                rescued = rescue_queue(store, self.kicker, queue) if reason == "rescue" else []
                worker = Worker(store, self.tasks, self.kicker, options)
                summary = worker.drain(queue, remaining_ms, hop=hop)
                summary.rescued = len(rescued)
                return summary
        finally:
            linger.close_all()

    def reap(self) -> dict[str, Any]:
        with self._store() as store:
            return reap(store, self.kicker, retention=self.settings.retention)

    @contextmanager
    def _store(self) -> Iterator[JobStore]:
        """A connection for one invocation, closed before it returns; schema checked once."""
        with JobStore.open(self.dsn(), retries=self.settings.connect_retries) as store:
            if not self._schema_checked:
                schema.check(store)
                self._schema_checked = True
            yield store


def set_default_kicker(kicker: Kicker | None) -> Kicker | None:
    """Replace the process-wide kicker (pgkick.testing installs its own); returns the old one.

    None forgets it, so the next `default_kicker()` reads PGKICK_KICKER again."""
    global _default
    with _default_lock:
        previous, _default = _default, kicker
    return previous
