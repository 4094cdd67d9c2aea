"""The kick protocol (pgkick.kick.watch): a producer kicks only when no worker will see its job,
and no job is ever stranded, whatever the interleaving of a producer's commit-and-check
with a worker's withdraw-and-last-claim. Two real connections; the order of statements is
forced by the test (each step commits before the next starts), no sleeps."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgkick.kick.kickers import NoKicker, kick_event
from pgkick.kick.watch import claims_while_lingering
from pgkick.producer import enqueue as producer
from pgkick.store import queries
from pgkick.store.worker import Announcement
from pgkick.tasks.registry import Registry
from pgkick.validation import job_spec
from pgkick.worker.lapse import SLACK_SECONDS
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev import queries as dev_queries
from tests.helpers import FakeClock
from tests.spies import WAIT, WatchedStore
from tests.store import JobStore

LEASE = timedelta(minutes=5)
PENDING = timedelta(seconds=10)
TTL = timedelta(seconds=5)
BEAT = timedelta(milliseconds=10)  # the heartbeat's pace in real time (it reads the moved clock)
SECOND = WorkerOptions(heartbeat=False)  # a worker a kick starts


class RecordingKicker:
    def __init__(self) -> None:
        self.kicks: list[tuple[str, str, int]] = []
        self.wakes: list[str] = []

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        kick_event(queue, reason, hop)  # a reason no worker accepts fails the test
        self.kicks.append((queue, reason, hop))

    def wake_at(self, queue: str, when: Any) -> None:
        self.wakes.append(queue)


@pytest.fixture
def two(dsn: str) -> Iterator[tuple[JobStore, JobStore]]:
    """A producer's connection and a worker's, as two processes would have."""
    with JobStore.open(dsn) as producer_store, JobStore.open(dsn) as worker_store:
        yield producer_store, worker_store


def _announce(store: JobStore, watcher: str = "w1") -> list[int]:
    """A worker's first round trip: announce itself and claim (returns what it claimed)."""
    _, jobs = store.complete_many_and_claim(
        [], "q", batch=10, lease=LEASE, announce=Announcement(watcher, TTL)
    )
    return [job.id for job in jobs]


# The two sides of the protocol, one committed statement per step.
def _producer_steps(p: JobStore, seen: dict[str, Any]) -> list[Callable[[], None]]:
    spec = job_spec({}, task="noop", queue="q")

    def commit() -> None:
        seen["job"] = p.insert(spec).id

    def check() -> None:
        seen["kick"] = "q" in p.reserve_kicks(["q"], PENDING)

    return [commit, check]


def _worker_steps(w: JobStore, seen: dict[str, Any], *, correct: bool) -> list[Callable[[], None]]:
    def withdraw() -> None:
        w.withdraw("q", "w1")

    def last_claim() -> None:
        seen["claimed"] = [job.id for job in w.claim("q", batch=10, lease=LEASE)]

    return [withdraw, last_claim] if correct else [last_claim, withdraw]


def _interleavings(a: int, b: int) -> Iterator[tuple[int, ...]]:
    """Every order of a steps of side 0 and b steps of side 1, each side's order kept."""
    for positions in itertools.combinations(range(a + b), a):
        yield tuple(0 if i in positions else 1 for i in range(a + b))


def _strands(p: JobStore, w: JobStore, order: tuple[int, ...], *, correct: bool) -> bool:
    """Play one interleaving on a worker that announced; True if the job is left to nobody."""
    w.execute(dev_queries.JOB_TRUNCATE_ALL)
    p.execute("DELETE FROM pgkick.queue_watchers")
    _announce(w)
    seen: dict[str, Any] = {}
    sides = [iter(_producer_steps(p, seen)), iter(_worker_steps(w, seen, correct=correct))]
    for side in order:
        next(sides[side])()
    return not seen["kick"] and seen["job"] not in seen["claimed"]


def test_no_interleaving_of_commit_check_and_withdraw_claim_strands_a_job(
    two: tuple[JobStore, JobStore],
) -> None:
    """Catches: a worker that claims before it withdraws (or a producer that checks before
    it commits). The same interleavings on the wrong order do strand a job, so this test
    sees the difference."""
    p, w = two
    orders = list(_interleavings(2, 2))
    assert len(orders) == 6
    assert [o for o in orders if _strands(p, w, o, correct=True)] == []
    assert any(_strands(p, w, o, correct=False) for o in orders)


def test_a_check_that_runs_while_the_withdrawal_is_uncommitted_is_covered_by_the_last_claim(
    dsn: str, two: tuple[JobStore, JobStore]
) -> None:
    """The check's snapshot sees the worker still there (its DELETE not yet committed), so
    nobody kicks: the worker's last claim, after its commit, must see the job."""
    p, w = two
    _announce(w)
    with psycopg.connect(dsn) as raw:  # the worker's withdrawal, held open
        with raw.transaction():
            raw.execute(queries.QUEUE_WATCHER_WITHDRAW, {"queue": "q", "watcher": "w1"})
            job, must_kick = p.insert_and_reserve(
                job_spec({}, task="noop", queue="q"), reserve=True, pending=PENDING
            )
            assert not must_kick
    assert [j.id for j in w.claim("q", batch=10, lease=LEASE)] == [job.id]


def test_a_pending_kick_stands_for_a_worker_until_one_announces(
    two: tuple[JobStore, JobStore],
) -> None:
    """Of racing producers exactly one kicks; the worker it starts takes the pending kick
    up in its announcement, so a producer that saw only the pending kick is covered too."""
    p, w = two
    spec = job_spec({}, task="noop", queue="q")
    first = [p.insert_and_reserve(spec, reserve=True, pending=PENDING)[1] for _ in range(3)]
    assert first == [True, False, False]
    assert len(_announce(w)) == 3  # the kicked worker arrives: the 'kick' row becomes its own
    rows = p.rows("SELECT watcher FROM pgkick.queue_watchers WHERE queue = 'q'")
    assert rows == [("w1",)]
    assert w.withdraw_and_claim("q", "w1", batch=10, lease=LEASE) == []
    assert p.reserve_kicks(["q"], PENDING) == {"q"}  # nobody left: the next job kicks


def test_a_crashed_workers_announcement_expires_and_producers_kick_again(
    dsn: str, clock: FakeClock
) -> None:
    with JobStore.open(dsn, clock) as w, JobStore.open(dsn, clock) as p:
        _announce(w)  # then the worker dies without withdrawing
        assert p.reserve_kicks(["q"], PENDING) == set()
        clock.advance(TTL.total_seconds() + 0.001)
        assert p.reserve_kicks(["q"], PENDING) == {"q"}
        # and that kick, unanswered, stands for a worker only for its pending window
        assert p.reserve_kicks(["q"], PENDING) == set()
        clock.advance(PENDING.total_seconds() + 0.001)
        assert p.reserve_kicks(["q"], PENDING) == {"q"}


def test_enqueue_and_kick_checks_after_its_commit_in_the_same_round_trip(dsn: str) -> None:
    """One kick for a burst of single enqueues; a worker present means no kick at all."""
    kicker = RecordingKicker()
    for _ in range(20):
        producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)
    assert kicker.kicks == [("q", "enqueue", 0)]
    with JobStore.open(dsn) as w:
        w.execute("DELETE FROM pgkick.queue_watchers")
        _announce(w)
        producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)
        assert len(kicker.kicks) == 1


def test_a_rolled_back_savepoint_kicks_and_wakes_nothing(dsn: str) -> None:
    """Catches: a job enqueued in a savepoint that rolled back still being kicked/woken."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn) as conn:
        with producer.transaction(conn, kicker=kicker) as jobs:
            with pytest.raises(ZeroDivisionError), conn.transaction():
                jobs.enqueue({}, task="noop", queue="gone")
                jobs.enqueue({}, task="noop", queue="gone-later", delay=600)
                raise ZeroDivisionError
            jobs.enqueue({}, task="noop", queue="kept")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert kicker.kicks == [("kept", "enqueue", 0)] and kicker.wakes == []


class _LateProducer:
    """The worker's pauses while it lingers, on a moved clock: during the third one an app
    commits a job."""

    def __init__(self, dsn: str, kicker: RecordingKicker) -> None:
        self.dsn, self.kicker, self.pauses, self.now = dsn, kicker, 0, 0.0

    def sleep(self, seconds: float) -> None:
        self.pauses += 1
        self.now += seconds
        if self.pauses == 3:
            producer.enqueue_and_kick({}, task="noop", queue="q", dsn=self.dsn, kicker=self.kicker)


def test_a_lingering_worker_takes_the_next_job_of_a_trickle_without_a_kick(dsn: str) -> None:
    kicker = RecordingKicker()
    registry = Registry()
    registry.task("noop")(lambda payload, job: None)
    options = WorkerOptions(heartbeat=False, linger=timedelta(seconds=1))
    app = _LateProducer(dsn, kicker)
    with JobStore.open(dsn) as store:
        worker = Worker(store, registry, kicker, options)
        worker.sleep, worker.monotonic = app.sleep, lambda: app.now
        summary = worker.drain("q", lambda: 60_000)
    assert summary.claimed == 1 and summary.done == 1 and summary.stopped_because == "empty"
    assert app.now >= 1.0  # it lingered its whole window (on the moved clock) before leaving
    assert kicker.kicks == []  # the producer saw the worker, so it did not kick
    with JobStore.open(dsn) as store:  # and the worker withdrew before it left
        assert store.rows("SELECT * FROM pgkick.queue_watchers") == []


def test_the_none_kicker_reserves_no_kick_that_would_silence_other_producers(dsn: str) -> None:
    """Catches: PGKICK_KICKER=none still marking a pending kick, so for its window another
    producer (with a real kicker) would trust a kick that was never sent."""
    producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=NoKicker())
    producer.enqueue_many(
        [{"payload": {}, "task": "noop", "queue": "q"}], dsn=dsn, kicker=NoKicker()
    )
    kicker = RecordingKicker()
    producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)
    assert kicker.kicks == [("q", "enqueue", 0)]


def test_a_lingering_worker_claims_an_empty_queue_a_bounded_number_of_times(dsn: str) -> None:
    """The README's bound (14 claims in a 1 s window), checked on the worker itself with a
    moved clock: catches pauses that stop growing (a worker hammering an empty queue)."""
    app = _LateProducer(dsn, RecordingKicker())
    app.pauses = 10  # past the one that would enqueue: the queue stays empty
    options = WorkerOptions(heartbeat=False, linger=timedelta(seconds=1))
    with JobStore.open(dsn) as store:
        worker = Worker(store, Registry(), RecordingKicker(), options)
        worker.sleep, worker.monotonic = app.sleep, lambda: app.now
        assert worker.drain("q", lambda: 60_000).stopped_because == "empty"
    assert app.pauses - 10 == claims_while_lingering(timedelta(seconds=1)) == 14


class _NearFutureProducer:
    """The worker's pauses, on the drain's clock and the SQL's (`clock`): in the pause that
    ends its window an app commits a job due `due_in` seconds after the SQL's now, on a
    connection of its own, and reserves its kick as a producer does (the worker watches:
    none). `sweep_after`: how far the SQL's clock moves between the worker's last claim and
    its exit sweep (the few ms between the two statements)."""

    def __init__(self, dsn: str, clock: FakeClock, due_in: float) -> None:
        self.dsn, self.clock, self.due_in, self.now = dsn, clock, due_in, 0.0
        self.job: int | None = None
        self.reserved: set[str] | None = None

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.clock.advance(seconds)
        if self.job is None and self.now >= 1.0:
            with JobStore.open(self.dsn, self.clock) as app:
                spec = job_spec({}, task="noop", queue="q", delay=self.due_in)
                self.job = app.insert_many([[spec]])[0].id
                self.reserved = app.reserve_kicks(["q"], PENDING)


@pytest.mark.parametrize(
    ("due_in", "sweep_after"),
    [
        (0.05, 0.0),  # due 50 ms later: inside the 100 ms allowance, so kicked by nobody
        (0.05, 0.051),  # an app clock 50 ms ahead: due at the sweep, after the last claim
    ],
)
def test_a_leaving_worker_stays_for_its_own_queues_job_due_within_the_allowance(
    dsn: str, clock: FakeClock, due_in: float, sweep_after: float
) -> None:
    """Catches (review F3, F4): a job due within the server-clock allowance, committed near
    the end of a worker's linger, got no kick (the producer saw the worker), was not due at
    the worker's last claim, and the exit sweep never kicks the worker's own queue: it
    waited for Scheduler's next minute (5 to 65 s), or, due by the sweep's clock, for new
    traffic or the reaper. The worker now stays until it is due and claims it."""
    kicker = RecordingKicker()
    registry = Registry()
    registry.task("noop")(lambda payload, job: None)
    options = WorkerOptions(heartbeat=False, linger=timedelta(seconds=1))
    app = _NearFutureProducer(dsn, clock, due_in)

    class Store(JobStore):
        def withdraw_and_claim(self, *args: Any, **kwargs: Any) -> Any:
            jobs = super().withdraw_and_claim(*args, **kwargs)
            if app.job is not None:
                clock.advance(sweep_after)
            return jobs

    with JobStore.open(dsn, clock) as seeding:
        seeding.insert_many([[job_spec({}, task="noop", queue="q")] * 2])  # a trickle: lingers
    with Store.open(dsn, clock) as store:
        worker = Worker(store, registry, kicker, options)
        worker.sleep, worker.monotonic = app.sleep, lambda: app.now
        summary = worker.drain("q", lambda: 60_000)
    assert app.reserved == set()  # the producer left it to the lingering worker
    assert (summary.done, summary.stopped_because) == (3, "empty")
    assert kicker.kicks == []
    with JobStore.open(dsn) as store:  # it withdrew again before it left
        assert store.rows("SELECT * FROM pgkick.queue_watchers") == []


class _SignallingKicker(RecordingKicker):
    """A RecordingKicker that says when a kick arrived (the heartbeat's thread sends it)."""

    def __init__(self) -> None:
        super().__init__()
        self.kicked = threading.Event()

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        super().kick(queue, reason, hop=hop)
        self.kicked.set()


def test_a_busy_worker_kicks_for_a_job_left_to_it_once_its_announcement_lapses(
    dsn: str, clock: FakeClock
) -> None:
    """Catches (kicks.md's latency hole): a job committed during a long task, after the
    worker's announcement and before its lapse, got no kick (the producer saw the worker)
    and waited for the end of the batch (up to the invocation's timeout). At the lapse the
    busy worker's heartbeat finds it ready and unwatched and kicks one worker, which claims
    it while the long task still runs. The worker's clock and the SQL's are moved together,
    past the promise; the test waits on the kick, never on time."""
    kicker = _SignallingKicker()
    registry = Registry()
    registry.task("noop")(lambda payload: None)
    moved = [0.0]  # the busy worker's monotonic clock
    seen: dict[str, Any] = {}

    @registry.task("long")
    def long(payload: Any) -> None:
        with JobStore.open(dsn, clock) as app:  # an app commits while the worker is announced
            seen["job"] = app.insert(job_spec({}, task="noop", queue="q")).id
            seen["reserved"] = app.reserve_kicks(["q"], PENDING)
        seen["early"] = kicker.kicked.is_set()  # inside its promise: nothing yet
        past = TTL.total_seconds() + SLACK_SECONDS + 0.001  # past the promise and its margin
        clock.advance(past)  # on both clocks
        moved[0] += past
        seen["kicked"] = kicker.kicked.wait(WAIT)
        seen["kicks"] = list(kicker.kicks)
        with JobStore.open(dsn, clock) as second:  # the worker that kick starts
            seen["second"] = Worker(second, registry, NoKicker(), SECOND).drain("q", lambda: 60_000)

    options = WorkerOptions(batch=1, max_fanout=0, watch_ttl=TTL, cancel_check=BEAT)
    with JobStore.open(dsn, clock) as store:
        store.insert_many([[job_spec({}, task="long", queue="q")]])
        worker = Worker(store, registry, kicker, options)
        worker.monotonic = lambda: moved[0]
        summary = worker.drain("q", lambda: 60_000)
    assert seen["reserved"] == set() and not seen["early"]
    assert seen["kicked"], f"no kick while the batch ran past its promise ({WAIT} s)"
    assert seen["kicks"] == [("q", "rekick", 1)]  # one, as a hand-over: this hop + 1
    assert seen["second"].done == 1  # claimed by the kicked worker, during the long task
    assert (summary.done, summary.lapse_kicks) == (1, 1)


def test_a_batch_that_ends_within_its_promise_sends_no_lapse_statement(
    dsn: str, clock: FakeClock
) -> None:
    """Catches: the hot path paying for the lapse (a ready check or a reservation from the
    heartbeat while the worker's announcement still holds): a task that outlasts two beats
    of the heartbeat inside its promise, with a job waiting behind it, sends the claims and
    the beats' statements, and no ready check, reservation or kick."""
    kicker = RecordingKicker()
    registry = Registry()
    registry.task("noop")(lambda payload: None)
    options = WorkerOptions(batch=1, max_fanout=0, watch_ttl=TTL, lease=timedelta(seconds=0.3))
    with WatchedStore.open(dsn, clock) as store:
        registry.task("long")(lambda payload: store.wait_extensions(2))
        store.insert_many([[job_spec({}, task="long", queue="q")]])
        store.insert_many([[job_spec({}, task="noop", queue="q")]])  # ready behind it
        worker = Worker(store, registry, kicker, options)
        worker.monotonic = lambda: 0.0  # inside its promise throughout
        summary = worker.drain("q", lambda: 60_000)
    assert summary.done == 2 and kicker.kicks == []
    names = {s.name for s in store.statements}
    assert "job_extend_many" in names  # the heartbeat did beat
    assert not names & {"job_ready_exists", "queue_kick_reserve"}
