"""A kick a worker or the reaper sends that fails (Lambda throttles, the endpoint is down)
is healed as a producer's is (pgkick.kick.safety.wake_after_failed_kick): the pending kick
it reserved is forgotten, so the next producer kicks, and a wake-up is booked; a worker
whose hand-over found neither kick nor wake-up keeps its rescue armed.

Each was found by a review (2026-12-05) on the real worker: the failure was only logged,
"the reaper will", and the reservation made every producer trust a kick never sent, so the
jobs waited for the daily reaper. Each test drives the real Worker.drain or reap() on the
embedded PostgreSQL and fails without the fix (checked by hand)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import psycopg

import pgkick
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Summary, Worker, WorkerOptions
from pgkick.worker.reaper import reap
from tests.helpers import seed
from tests.store import JobStore
from tests.test_producer import RecordingKicker

OPTIONS = WorkerOptions(heartbeat=False, max_fanout=0, kick_safety=timedelta(seconds=60))


class FailingKicker(RecordingKicker):
    """Every kick raises (Lambda throttled); wake-ups are booked unless `wakes_fail`; the
    rescue's bookings are recorded."""

    def __init__(self, *, wakes_fail: bool = False) -> None:
        super().__init__(fail=True)
        self.wakes_fail = wakes_fail
        self.rescues: list[str] = []
        self.cancelled: list[str] = []

    def wake_at(self, queue: str, when: datetime) -> None:
        if self.wakes_fail:
            raise ConnectionError("Scheduler unreachable")
        super().wake_at(queue, when)

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        self.rescues.append(name)

    def cancel_rescue(self, name: str) -> None:
        self.cancelled.append(name)


def noop_tasks() -> Registry:
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    return tasks


def watchers(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT queue, watcher FROM pgkick.queue_watchers ORDER BY 1, 2")
        return [(str(queue), str(watcher)) for queue, watcher in rows]


def out_of_time_after_one_batch() -> Iterator[int]:
    """The invocation's clock: time for one batch, then below min_remaining (1 s). The
    batch's reads: one before its claim, one before each of its 10 jobs (no job starts
    below the reserve), one after it (its duration)."""
    yield from [60_000] * 12
    while True:
        yield 100


def hand_over(store: JobStore, kicker: FailingKicker) -> Summary:
    seed(store, 25, queue="q")
    budget = out_of_time_after_one_batch()
    options = OPTIONS._replace(batch=10, min_remaining=timedelta(seconds=1))
    return Worker(store, noop_tasks(), kicker, options).drain("q", lambda: next(budget))


def test_a_hand_over_whose_kick_fails_books_its_queue_a_wake_up(dsn: str) -> None:
    """Catches the rekick's failure only logged: the worker out of time left 15 ready jobs,
    its own queue skipped by its exit sweep, no wake-up, its rescue cancelled."""
    kicker = FailingKicker()
    with JobStore.open(dsn) as store:
        summary = hand_over(store, kicker)
    assert (summary.done, summary.stopped_because, summary.rekicked) == (10, "time", False)
    # the failed kick's wake-up, beside the rekick's safety (noted before the kick was sent)
    wake, safety = sorted(when for queue, when in kicker.wakes if queue == "q")
    assert len(kicker.wakes) == 2 and safety - wake >= timedelta(seconds=59)
    assert kicker.rescues and kicker.cancelled == kicker.rescues  # a clean finish


def test_a_hand_over_with_neither_kick_nor_wake_up_keeps_its_rescue_armed(dsn: str) -> None:
    """Catches a worker that could send nothing at all cancelling its rescue anyway: the
    rescue (lease + announcement later) is then the queue's only way back."""
    kicker = FailingKicker(wakes_fail=True)
    with JobStore.open(dsn) as store:
        summary = hand_over(store, kicker)
    assert summary.rekicked is False and kicker.wakes == []
    assert kicker.rescues and kicker.cancelled == []


def test_a_failed_kick_for_released_dependants_forgets_its_reservation_and_wakes(
    dsn: str,
) -> None:
    """Catches the dependants' kick reserved, failed and kept: for PGKICK_KICK_PENDING_MS
    every producer of the dependant's queue trusted it (and the worker's own sweep skipped
    the queue), and no wake-up followed."""
    producer = RecordingKicker()
    parent = pgkick.enqueue_and_kick({}, task="noop", queue="a", dsn=dsn, kicker=producer)
    pgkick.enqueue_and_kick({}, task="noop", queue="b", dsn=dsn, kicker=producer, after=[parent])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM pgkick.queue_watchers")  # the producer's own reservations
    kicker = FailingKicker()
    with JobStore.open(dsn) as store:
        summary = Worker(store, noop_tasks(), kicker, OPTIONS).drain("a", lambda: 600_000)
    assert (summary.done, summary.dependant_kicks) == (1, 0)
    assert "b" in [queue for queue, _ in kicker.wakes]
    assert ("b", "kick") not in watchers(dsn)
    later = RecordingKicker()
    pgkick.enqueue_and_kick({}, task="noop", queue="b", dsn=dsn, kicker=later)
    assert later.kicks == [("b", "enqueue")]  # no dead reservation to trust


def test_a_leaving_workers_failed_heal_kick_forgets_its_reservation_and_wakes(
    dsn: str,
) -> None:
    """Catches the sweep's kick of a stranded queue reserved (queue_heal_plan), failed and
    kept, with no wake-up."""
    kicker = FailingKicker()
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="h")  # its producer's kick was lost
        seed(store, 1, queue="a")
        summary = Worker(store, noop_tasks(), kicker, OPTIONS).drain("a", lambda: 600_000)
    assert (summary.done, summary.healed_kicks) == (1, 0)
    assert "h" in [queue for queue, _ in kicker.wakes]
    assert ("h", "kick") not in watchers(dsn)


def test_the_reapers_failed_kick_forgets_the_reservation_its_sweep_made_and_wakes(
    dsn: str,
) -> None:
    """Catches the reaper's wake-up sweep reserving the kick of a queue whose kick had just
    failed ("the plan's reservation marks that kick as on its way"): a kick never sent held
    producers off, and no wake-up was booked."""
    kicker = FailingKicker()
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="r")
        report = reap(store, kicker, retention=timedelta(days=7))
    assert report["kick_failures"] == ["r"] and "r" in report["woken"]
    assert ("r", "kick") not in watchers(dsn)
    assert [queue for queue, _ in kicker.wakes] == ["r"]
