"""Self-healing dispatch (issue #30, defect 2): a worker that leaves, and the reaper, sweep
every queue, so a lost kick or a lost wake-up is healed without waiting for the daily reaper.

The worker is the real loop on the real database, the clock is injected (FakeClock: the
SQL's now); the kicker records what it is asked (the kick protocol, not an AWS client)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from pgkick.kick.kickers import WAKE_AHEAD, WAKE_MARGIN, booking_minute, first_minute, wake_minute
from pgkick.tasks.registry import Registry
from pgkick.validation import JobSpec
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.reaper import reap
from tests.helpers import FakeClock, seed
from tests.store import JobStore
from tests.test_producer import RecordingKicker

OPTIONS = WorkerOptions(batch=10, heartbeat=False, kick_pending=timedelta(seconds=10))


@pytest.fixture
def timed(dsn: str, clock: FakeClock) -> Iterator[JobStore]:
    with JobStore.open(dsn, clock) as opened:
        yield opened


def forever() -> int:
    return 600_000


def delayed(store: JobStore, queue: str, *delays: float) -> None:
    specs = [JobSpec(queue, "noop", "{}", None, timedelta(seconds=d), 5) for d in delays]
    store.insert_many([specs])


def drain_other_queue(store: JobStore, kicker: RecordingKicker) -> None:
    seed(store, 1, queue="other")
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    summary = Worker(store, tasks, kicker, OPTIONS).drain("other", forever)
    assert (summary.done, summary.stopped_because) == (1, "empty")


def test_a_leaving_worker_kicks_a_queue_whose_kick_was_lost(
    timed: JobStore, clock: FakeClock
) -> None:
    """A job committed on `lost` whose kick never became a worker (dropped by Lambda; its
    pending reservation has lapsed): the next worker to leave any queue kicks it. On main
    nothing did, and the job waited for the reaper."""
    seed(timed, 1, queue="lost")
    assert timed.reserve_kicks(["lost"], timedelta(seconds=10)) == {"lost"}  # the kick sent...
    clock.advance(11)  # ...and lost: its reservation lapsed
    kicker = RecordingKicker()
    drain_other_queue(timed, kicker)
    assert kicker.kicks == [("lost", "heal")]
    kicker.kicks.clear()
    drain_other_queue(timed, kicker)  # the heal kick is on its way: reserved, sent once
    assert kicker.kicks == []


def test_a_watched_or_running_queue_is_not_kicked(timed: JobStore, clock: FakeClock) -> None:
    seed(timed, 1, queue="watched")
    timed.reserve_kicks(["watched"], timedelta(seconds=10))  # a kick on its way
    seed(timed, 2, queue="held")
    assert len(timed.claim("held", batch=1, lease=timedelta(minutes=5))) == 1  # its holder heals
    kicker = RecordingKicker()
    drain_other_queue(timed, kicker)
    assert kicker.kicks == []


def test_a_ready_job_behind_a_group_head_not_due_is_not_kicked_but_woken_at_the_head(
    timed: JobStore, clock: FakeClock
) -> None:
    """A group's head (priority 10) is due in 30 minutes; a job behind it is due now, which
    no claim can take (a group runs through its head). Catches the sweep kicking that queue
    anyway (a review: two such queues' leaving workers kicked each other's, claiming
    nothing, until the head was due), and a wake-up booked other than at the head's time;
    a group whose head is due is still kicked."""
    due_head = JobSpec("blocked", "noop", "{}", None, timedelta(minutes=30), 5, priority=10,
                       group="g")  # fmt: skip
    timed.insert_many([[due_head]])
    timed.insert_many([[JobSpec("blocked", "noop", "{}", None, timedelta(0), 5, group="g")]])
    timed.insert_many([[JobSpec("head-due", "noop", "{}", None, timedelta(0), 5, group="g")]])
    kicker = RecordingKicker()
    drain_other_queue(timed, kicker)
    assert kicker.kicks == [("head-due", "heal")]
    assert ("blocked", clock.now + timedelta(minutes=30)) in [
        (queue, when.astimezone(UTC)) for queue, when in kicker.wakes
    ]


def test_a_leaving_worker_books_one_wake_up_per_queue_at_its_earliest_run_at(
    timed: JobStore, clock: FakeClock
) -> None:
    """A wake-up lost (Scheduler throttled or refused it, or the producer died after its
    commit): the next worker to leave books the queue's earliest run_at, once per queue."""
    delayed(timed, "later", 600, 1200, 1800)
    delayed(timed, "sooner", 300)
    kicker = RecordingKicker()
    drain_other_queue(timed, kicker)
    assert sorted(kicker.wakes) == [
        ("later", clock.now + timedelta(seconds=600)),
        ("sooner", clock.now + timedelta(seconds=300)),
    ]


def test_the_reaper_books_each_queues_next_wake_up(timed: JobStore, clock: FakeClock) -> None:
    delayed(timed, "later", 600, 1200)
    kicker = RecordingKicker()
    report = reap(timed, kicker, retention=timedelta(days=7))
    assert report["woken"] == ["later"]
    assert kicker.wakes == [("later", clock.now + timedelta(seconds=600))]


@pytest.mark.parametrize("second", [0, 1, 30, 54, 55, 59.9])
def test_a_wake_up_is_booked_at_least_a_minute_and_a_margin_ahead(second: float) -> None:
    """Defect 2's hand-over: after the hop budget a worker books a wake-up for "now", and main
    rounded it up to the next minute: at 12:00:59.9 that is 0.1 s ahead, an at() already past
    by the time Scheduler reads it (refused). A booking that must not be refused (a rescue,
    and a wake-up refused once) is now always > 1 min ahead."""
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC) + timedelta(seconds=second)
    minute = booking_minute(now, now)
    assert minute - now > WAKE_AHEAD and minute.second == 0
    later = now + timedelta(minutes=10)
    assert booking_minute(later, now) == wake_minute(later)  # a far run_at keeps its minute


@pytest.mark.parametrize("second", [0, 1, 30, 54, 55, 59.9])
def test_a_wake_up_is_first_tried_at_its_own_minute_a_margin_ahead(second: float) -> None:
    """A wake-up's first try (a failed kick's, a hand-over's, a retry's) takes the first whole
    minute at least WAKE_MARGIN ahead: never past when computed, and up to a minute sooner
    than booking_minute (a refusal is booked again there: tests/test_wake_bookings.py)."""
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC) + timedelta(seconds=second)
    minute = first_minute(now, now)
    assert WAKE_MARGIN <= minute - now < WAKE_MARGIN + timedelta(minutes=1), minute
    assert minute.second == 0 and minute < booking_minute(now, now)
    later = now + timedelta(minutes=10)
    assert first_minute(later, now) == wake_minute(later)


class DroppingKicker(RecordingKicker):
    """Lambda and Scheduler accept every kick and wake-up, then lose them (AWS documents
    both: an async event past its maximum age, a schedule's undeliverable target)."""


def run_queue(store: JobStore, queue: str) -> int:
    tasks = Registry()
    tasks.task("noop")(lambda payload: None)
    return Worker(store, tasks, DroppingKicker(), OPTIONS).drain(queue, forever).done


def test_a_dropped_kick_heals_at_the_next_worker_leaving_without_the_reaper(dsn: str) -> None:
    """The kick of a committed job is dropped. Without the reaper, the next worker to leave
    any queue (here 30 s later) kicks its queue, and that kick's worker runs it."""
    from pgkick.producer import enqueue as producer

    dropping = DroppingKicker()
    job = producer.enqueue_and_kick({}, task="noop", queue="a", dsn=dsn, kicker=dropping)
    assert dropping.kicks == [("a", "enqueue")]  # sent, and lost
    committed = datetime.now(UTC)  # the producer's statements run on the server's clock
    clock = FakeClock(committed + timedelta(seconds=30))  # other traffic: a worker leaves b
    with JobStore.open(dsn, clock) as store:
        healer = RecordingKicker()
        drain_other_queue(store, healer)
        assert healer.kicks == [("a", "heal")]
        assert run_queue(store, "a") == 1
        assert store.get_many([job])[0]["status"] == "done"
    assert clock.now - committed == timedelta(seconds=30)  # the delay: until a worker left


def test_a_dropped_wake_up_heals_at_the_next_worker_leaving_without_the_reaper(
    timed: JobStore, clock: FakeClock
) -> None:
    """A delayed job's wake-up fires and is lost. Once it is due, the next worker to leave
    any queue kicks its queue (ready, unwatched, nothing running): run 30 s past its time."""
    delayed(timed, "a", 120)
    clock.advance(150)  # the wake-up at +120 s was dropped; traffic 30 s later
    healer = RecordingKicker()
    drain_other_queue(timed, healer)
    assert healer.kicks == [("a", "heal")]
    assert run_queue(timed, "a") == 1
