"""A lingering worker woken by the producer's NOTIFY (pgkick.worker.linger): the real worker
loop and the real producer on the embedded server; the worker's waits are the store's own,
watched (and, where said, stretched) by a subclass. No sleeps decide anything: a wait
stretched to WAIT seconds that ends with a notification can only have been ended by one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgkick.kick.watch import FIRST_PAUSE, WorkerWatch
from pgkick.producer import enqueue as producer
from pgkick.store.listen import queue_channel
from pgkick.store.worker import Announcement
from pgkick.tasks.registry import Registry
from pgkick.worker.linger import WakeUpLine
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.embedded import EmbeddedPostgres
from tests.helpers import Ticks, statement_calls
from tests.pgbouncer import pgbouncer, requires_pgbouncer
from tests.spies import WAIT
from tests.store import JobStore
from tests.test_watch import RecordingKicker

LINGER = timedelta(milliseconds=100)
CHANNEL = queue_channel("pgkick", "q")
NAMING = ["-- queue_watcher_listen:%"]  # a worker naming its channel on its announcement


class WatchedWaits(JobStore):
    """The worker's store, whose waits are recorded; `first` runs at the first wait (the
    worker is lingering, listening), then that wait lasts `stretch` seconds at most (None:
    its own pause). Later waits move the worker's clock by their pause, so its linger
    window ends after the usual number of pauses."""

    first: Callable[[JobStore], None] = staticmethod(lambda store: None)
    stretch: float | None = None
    ticks: Ticks

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waits: list[tuple[float, bool]] = []  # (timeout asked, ended by a notification)

    def await_notification(self, timeout: float) -> bool:
        asked = timeout
        if not self.waits:
            type(self).first(self)
            timeout = self.stretch or timeout
        else:
            self.ticks.now += timeout
        woken = super().await_notification(timeout)
        self.waits.append((asked, woken))
        return woken


@pytest.fixture
def listener(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A bystander LISTENing on the queue's channel: counts the NOTIFYs producers send."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'LISTEN "{CHANNEL}"')
        yield conn


def notifications(conn: psycopg.Connection[Any]) -> int:
    """NOTIFYs received so far. A statement first: the server delivers what is pending
    before it answers, and every producer's commit returned before this call."""
    conn.execute("SELECT 1")
    return sum(1 for _ in conn.notifies(timeout=0))


def lingering_worker(dsn: str, store: WatchedWaits, kicker: RecordingKicker) -> Worker:
    registry = Registry()
    registry.task("noop")(lambda payload, job: None)
    options = WorkerOptions(heartbeat=False, linger=LINGER, listen="auto")
    worker = Worker(store, registry, kicker, options)
    store.ticks = Ticks()
    worker.monotonic = store.ticks
    worker.sleep = lambda seconds: pytest.fail("a direct session must wait on its socket")
    return worker


def enqueue(dsn: str, kicker: RecordingKicker) -> None:
    producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)


def test_a_notified_worker_claims_at_once_and_idle_queues_get_no_notify(
    dsn: str, listener: psycopg.Connection[Any]
) -> None:
    """Catches: a producer that does not NOTIFY the lingering worker (its first wait, held
    open WAIT seconds, would end by its timeout and the claim would wait for it), and one
    that notifies while no worker lingers (the bystander would count it)."""
    kicker = RecordingKicker()
    enqueue(dsn, kicker)  # nobody on the queue: a kick, no NOTIFY
    assert kicker.kicks == [("q", "enqueue", 0)] and notifications(listener) == 0
    with JobStore.open(dsn) as store:
        store.execute("DELETE FROM pgkick.jobs")
        store.execute("DELETE FROM pgkick.queue_watchers")  # the kick's worker never came
    listens = statement_calls(dsn, NAMING)

    kicker = RecordingKicker()
    WatchedWaits.first = staticmethod(lambda store: enqueue(dsn, kicker))
    WatchedWaits.stretch = WAIT
    with WatchedWaits.open(dsn) as store:
        summary = lingering_worker(dsn, store, kicker).drain("q", lambda: 60_000)
    assert store.waits[0] == (FIRST_PAUSE, True)  # ended by the NOTIFY, well before WAIT
    assert [woken for _, woken in store.waits[1:]] == [False] * (len(store.waits) - 1)
    assert summary.claimed == summary.done == 1 and summary.stopped_because == "empty"
    assert kicker.kicks == []  # the producer found the worker: a NOTIFY instead of a kick
    assert notifications(listener) == 1
    # the channel named once for the whole window, not per pause
    assert statement_calls(dsn, NAMING) == (listens + 1)

    enqueue(dsn, kicker)  # the worker withdrew (and UNLISTENed): back to a kick, no NOTIFY
    assert kicker.kicks == [("q", "enqueue", 0)] and notifications(listener) == 0
    with JobStore.open(dsn) as store:
        assert store.rows("SELECT * FROM pgkick.queue_watchers WHERE watcher <> 'kick'") == []
        assert store.rows("SELECT count(*) FROM pg_listening_channels()") == [(0,)]
    assert statement_calls(dsn, NAMING) == (listens + 1)


def test_a_busy_worker_past_its_window_gets_no_notify(
    dsn: str, listener: psycopg.Connection[Any]
) -> None:
    """Catches: notifying any watcher rather than a lingering one. A worker that announced
    (busy) without naming a channel, or whose window ended, is left to its next claim."""
    with JobStore.open(dsn) as worker:
        worker.complete_many_and_claim(
            [],
            "q",
            batch=10,
            lease=timedelta(minutes=5),
            announce=Announcement("w1", timedelta(seconds=5)),
        )
        kicker = RecordingKicker()
        enqueue(dsn, kicker)
        assert kicker.kicks == [] and notifications(listener) == 0  # busy: no NOTIFY
        worker.listen(CHANNEL, "q", "w1", timedelta(minutes=1), subscribe=False)
        enqueue(dsn, kicker)
        assert notifications(listener) == 1  # lingering: one
        worker.execute(
            "UPDATE pgkick.queue_watchers SET listening_until = now() - interval '1 second'"
        )
        enqueue(dsn, kicker)
        assert kicker.kicks == [] and notifications(listener) == 0  # window over: none


def test_a_lost_notification_leaves_the_job_to_the_next_pause(dsn: str) -> None:
    """Catches: a listening worker that waits longer than its pause (for a notification
    that never comes). The producer's NOTIFY goes to another channel (as if lost): the
    first wait ends at its own pause, FIRST_PAUSE as before, and the claim after it gets
    the job."""

    def lose_then_enqueue(store: JobStore) -> None:
        with JobStore.open(dsn) as other:
            other.execute("UPDATE pgkick.queue_watchers SET channel = 'elsewhere'")
        enqueue(dsn, kicker)

    kicker = RecordingKicker()
    WatchedWaits.first = staticmethod(lose_then_enqueue)
    WatchedWaits.stretch = None
    with WatchedWaits.open(dsn) as store:
        summary = lingering_worker(dsn, store, kicker).drain("q", lambda: 60_000)
    assert store.waits[0] == (FIRST_PAUSE, False)  # its pause, then the claim
    assert summary.claimed == summary.done == 1 and summary.batches == 1
    assert kicker.kicks == []


@requires_pgbouncer
def test_behind_a_transaction_mode_pooler_it_lingers_on_pauses_and_still_claims(
    dsn: str, embedded_pg: EmbeddedPostgres | None
) -> None:
    """Catches: a worker that LISTENs through PgBouncer in transaction mode, where the
    LISTEN subscribes whichever server session ran it and the worker never hears a NOTIFY.
    PGKICK_WORKER_LISTEN=auto sees the pooler (another backend pid than the connection's)
    and waits on its pauses, as before: the job is claimed after the first one."""

    def no_wait_on_the_socket(store: JobStore) -> None:
        pytest.fail("behind a transaction-mode pooler the worker must not wait for a NOTIFY")

    kicker = RecordingKicker()
    slept: list[float] = []
    WatchedWaits.first = staticmethod(no_wait_on_the_socket)
    WatchedWaits.stretch = None
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    with pgbouncer(dsn, embedded_pg.os_user if embedded_pg else None) as pooled:
        with WatchedWaits.open(make_conninfo(pooled, dbname=dbname)) as store:
            worker = lingering_worker(dsn, store, kicker)

            def pause(seconds: float) -> None:
                if not slept:
                    enqueue(dsn, kicker)
                slept.append(seconds)
                store.ticks.now += seconds

            worker.sleep = pause
            summary = worker.drain("q", lambda: 60_000)
    assert slept[0] == FIRST_PAUSE and store.waits == []
    assert summary.claimed == summary.done == 1 and summary.batches == 1
    assert kicker.kicks == []  # the worker was announced: the producer left the job to it
    with JobStore.open(dsn) as check:
        assert check.rows("SELECT channel FROM pgkick.queue_watchers") == []


class CountedNamings(JobStore):
    """A store whose waits move `ticks` by their timeout (and return at once), and which
    records when (on `ticks`) the channel was named."""

    ticks: Ticks

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.named_at: list[float] = []

    def listen(self, *args: Any, **kwargs: Any) -> None:
        self.named_at.append(round(self.ticks.now, 3))
        super().listen(*args, **kwargs)

    def await_notification(self, timeout: float) -> bool:
        self.ticks.now += timeout
        return super().await_notification(0)


def test_the_channel_is_named_again_before_a_wait_that_would_outlast_it(dsn: str) -> None:
    """Catches: renaming only once the name has run out. A wait that outlasts the name is
    blind (producers stop notifying at its end): the bench's trickle showed it as p99 50 ms,
    the jobs committed during the last pause of each window. The name lasts the linger
    window plus the longest pause (here 0.1 + 0.1 s); pauses of 0.15 s: the second wait
    would end past it, so the name is renewed before that wait, not after."""
    with CountedNamings.open(dsn) as store:
        store.ticks = Ticks()
        watch = WorkerWatch(ttl=timedelta(seconds=5), linger=LINGER, clock=store.ticks)
        store.complete_many_and_claim(
            [], "q", batch=10, lease=timedelta(minutes=5), announce=watch.announcement()
        )
        line = WakeUpLine(store, "q", watch, mode="on", sleep=lambda seconds: pytest.fail())
        for _ in range(3):
            line.wait(0.15)
    assert store.named_at == [100.0, 100.15, 100.3]
