"""Ready means claimable: a blocked group's queued jobs (its job running, or its head held
by a retry or not due) count for no kick, no hand-over and no `ready` count, while an
idle group's ready head, and any ungrouped ready job, do. Each test names the break it
catches; each break was applied by hand and seen to fail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pgkick.config import Settings
from pgkick.tasks.registry import Registry
from pgkick.validation import job_spec
from pgkick.worker.reaper import reap
from pgkick.worker.runtime import Runtime
from tests.helpers import FakeClock
from tests.store import JobStore
from tests.test_producer import RecordingKicker

LEASE = timedelta(minutes=5)


def add(store: JobStore, group: str | None = None, queue: str = "q", **options: Any) -> int:
    return store.insert(job_spec({}, task="t", queue=queue, group=group, **options)).id


def ready(store: JobStore) -> tuple[bool, dict[str, int]]:
    return store.ready_exists("q"), store.ready_by_queue()


def test_a_group_with_a_running_job_is_not_ready_an_idle_one_is(dsn: str, clock: FakeClock) -> None:
    """Catches: counting a blocked group's queued jobs as ready (a kick, a hand-over and
    a reaper kick for a worker that claims nothing), and the opposite break, an idle
    group's ready head or an ungrouped job no longer counted (work left unkicked)."""
    with JobStore.open(dsn, clock) as store:
        add(store, "g")
        add(store, "g")
        assert ready(store) == (True, {"q": 1})  # the group's head only: one claim's worth
        (running,) = store.claim("q", batch=1, lease=LEASE)
        assert ready(store) == (False, {})  # its second job waits for the first
        add(store, "h")
        add(store, None)
        assert ready(store) == (True, {"q": 2})  # h's head and the ungrouped job
        store.complete_many([running])
        assert store.ready_by_queue() == {"q": 3}


def test_a_group_held_by_a_retry_or_a_later_head_is_not_ready(dsn: str, clock: FakeClock) -> None:
    """job_claim's head rule: a job waiting for its retry holds its group; otherwise the
    head is the first in claim order. Catches: a ready check that counts the group's
    next job while its failed job waits for its backoff, or a ready later job while the
    head (higher priority, due later) is not due."""
    with JobStore.open(dsn, clock) as store:
        add(store, "g")
        add(store, "g")
        (first,) = store.claim("q", batch=1, lease=LEASE)
        store.fail(first.id, first.attempts, "boom", backoff=timedelta(seconds=10))
        assert ready(store) == (False, {})  # the retry is due in 10 s x 2^1 and holds g
        clock.advance(21)
        assert ready(store) == (True, {"q": 1})
    with JobStore.open(dsn, clock) as store:
        add(store, "late", priority=5, delay=60)
        add(store, "late")
        assert store.ready_by_queue() == {"q": 1}  # g's retry; "late" waits for its head


def test_only_blocked_jobs_left_make_no_reaper_kick_and_no_hand_over(
    dsn: str, clock: FakeClock
) -> None:
    """A worker runs out of time with queue q's only jobs left in a group another worker
    is running. Catches: the hand-over's ready check counting them (a rekick of a worker
    that would claim nothing), and the reaper kicking q for them."""
    with JobStore.open(dsn, clock) as store:
        add(store, "g")
        (held,) = store.claim("q", batch=1, lease=LEASE)  # another worker runs g
        add(store, "g")
        add(store, None)
        remaining = {"ms": 25_000}
        tasks = Registry()

        @tasks.task("t")
        def spend(payload: Any) -> None:
            remaining["ms"] = 1_000  # the invocation's time runs out with this job

        kicker = RecordingKicker()
        settings = Settings.from_env({"PGKICK_KICKER": "none", "PGKICK_MAX_FANOUT": "0"})
        runtime = Runtime(settings, kicker, dsn=lambda: dsn, tasks=tasks)
        summary = runtime.drain("q", lambda: remaining["ms"])
        assert (summary.done, summary.stopped_because, summary.rekicked) == (1, "time", False)
        assert kicker.kicks == []
        reaper_kicker = RecordingKicker()
        report = reap(store, reaper_kicker, retention=timedelta(days=7))
        assert (report["ready"], reaper_kicker.kicks) == ({}, [])
        store.complete_many([held])
        assert reap(store, reaper_kicker, retention=timedelta(days=7))["ready"] == {"q": 1}
