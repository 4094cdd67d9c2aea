"""Retry jitter: each retry waits its backoff times a factor in 0.9..1.1, from the worker's
random source, so a burst that failed together does not come back in lockstep."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from pgkick.kick.kickers import NoKicker
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions, backoff_jitter
from tests.helpers import FakeClock, seed
from tests.store import JobStore

OPTIONS = WorkerOptions(batch=50, heartbeat=False, max_fanout=0)


def failing_registry() -> Registry:
    tasks = Registry()

    @tasks.task("noop")
    def boom(payload: Any) -> None:
        raise RuntimeError("try again")

    return tasks


def retry_delays(dsn: str, clock: FakeClock, worker_setup: Any) -> list[float]:
    with JobStore.open(dsn, clock) as store:
        seed(store, 40)
        worker = Worker(store, failing_registry(), NoKicker(), OPTIONS)
        worker_setup(worker)
        summary = worker.drain("default", lambda: 600_000)
        assert summary.retried == 40
        rows = store.rows("SELECT run_at FROM pgkick.jobs ORDER BY id")
    return [(row[0] - clock.now).total_seconds() for row in rows]


def test_retries_spread_within_ten_percent_of_the_backoff(dsn: str, clock: FakeClock) -> None:
    """A seeded source gives the same spread every run. Catches a backoff with no jitter
    (all 40 retries at exactly +20 s) and a spread wider than ±10%."""
    factors = backoff_jitter(random.Random(7))
    expected = [20 * factors() for _ in range(40)]

    def seeded(worker: Worker) -> None:
        worker.jitter = backoff_jitter(random.Random(7))

    delays = retry_delays(dsn, clock, seeded)
    assert all(abs(a - b) < 1e-5 for a, b in zip(delays, expected, strict=True))
    assert all(18 <= d <= 22 for d in delays)
    assert len(set(delays)) == 40  # no two retries come back together
    assert max(delays) - min(delays) > 2  # spread across the window, not bunched


def test_the_jitter_factor_applies_after_the_cap(dsn: str, clock: FakeClock) -> None:
    """The factor multiplies the backoff after the cap, so capped retries spread too.
    Catches a jitter the SQL ignores (+20 s, +20 s, +5 s) or applies before the cap."""
    with JobStore.open(dsn, clock) as store:
        ids = seed(store, 3)
        a, b, c = store.claim("default", batch=3, lease=timedelta(minutes=5))
        outcomes = [
            store.fail(a.id, a.attempts, "e", jitter=0.9),
            store.fail(b.id, b.attempts, "e", jitter=1.1),
            store.fail(c.id, c.attempts, "e", jitter=1.1, backoff_cap=timedelta(seconds=5)),
        ]
    assert [o.run_at - clock.now for o in outcomes if o.run_at] == [
        timedelta(seconds=18),
        timedelta(seconds=22),
        timedelta(seconds=5.5),
    ]
    assert [a.id, b.id, c.id] == ids
