"""Rate limits per key, concurrency per group key with a round-robin claim, queue pause
(issue 33), all enforced by the claim (job_claim, migration 0014; pgkick.store.flow).

Workers are real sessions racing the real claim; time is the claim's injected `now` (a
shared clock that ticks at every statement), never a sleep."""

from __future__ import annotations

import json
import random
import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgkick import cli
from pgkick.errors import InvalidArgument, InvalidArgumentType
from pgkick.store import flow
from pgkick.store.worker import ClaimedJob
from pgkick.tasks.registry import Registry
from pgkick.validation import job_spec
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick.worker.reaper import reap
from tests.helpers import FakeClock, wait_for_lock_waiters
from tests.store import JobStore
from tests.test_producer import RecordingKicker

LEASE = timedelta(minutes=5)
OPTIONS = WorkerOptions(batch=5, heartbeat=False, kick_pending=timedelta(seconds=10), max_fanout=0)


class Kicker(RecordingKicker):
    """Records kicks and wake-ups (the kick protocol, not an AWS client); no rescues."""

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        return None

    def cancel_rescue(self, name: str) -> None:
        return None


class TickingClock(FakeClock):
    """Every read moves time on by `step` (shared by racing workers: their claims reach the
    claim lock in any order, so a claim may carry a now older than a start already made)."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = timedelta(seconds=step)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += self.step
            return self.now


def add(store: JobStore, n: int, **fields: object) -> int:
    return store.insert(job_spec({"n": n}, task="t", **fields)).id


def ns(jobs: list[ClaimedJob]) -> list[int]:
    return [job.payload["n"] for job in jobs]


def forever() -> int:
    return 600_000


def test_a_rate_per_key_is_never_exceeded_by_racing_workers(dsn: str) -> None:
    """3 starts per key per sliding 10 s, 8 keys, 4 workers (the real loop) racing on a clock
    that ticks at every statement. The tasks record each start (the claimed_at the claim
    wrote, its injected now); every window of 10 s ending at a start is checked. Catches a
    limit counted on a snapshot (two workers each see 2 starts and both start a third), a
    start forgotten, or a window measured from the wrong end; and a rate that blocks a
    key's neighbours (all 120 jobs must finish)."""
    clock = TickingClock(0.05)
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 3, timedelta(seconds=10))
        for n in range(120):
            add(store, n, queue="api", rate_key=f"k{n % 8}")
    ran: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work() -> None:
        try:
            tasks = Registry()
            tasks.task("t")(lambda payload: ran.append(payload["n"]))
            with JobStore.open(dsn, clock) as mine:
                worker = Worker(mine, tasks, Kicker(), OPTIONS)
                barrier.wait()
                while len(ran) < 120:
                    worker.drain("api", forever)  # leaves when the rate holds every key
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert sorted(ran) == list(range(120))
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT rate_key, claimed_at FROM pgkick.jobs WHERE queue = 'api'"
        ).fetchall()
    starts: dict[str, list[datetime]] = defaultdict(list)
    for key, at in rows:
        starts[key].append(at)
    busiest = 0
    for key_starts in starts.values():
        key_starts.sort()
        for end in key_starts:
            in_window = [t for t in key_starts if end - timedelta(seconds=10) < t <= end]
            busiest = max(busiest, len(in_window))
    assert busiest == 3  # reached, never passed


def test_a_claim_that_waited_for_the_claim_lock_records_its_start_after_the_wait(
    dsn: str,
) -> None:
    """Catches a rate's start recorded at the claim's transaction start (now(), fixed before
    the claim lock) where its job really started after waiting for the lock: the next claim,
    a period after the recorded start, was admitted less than a period after the real one
    (a review measured two starts of a key 0.57 s apart under a rate of 1 per 2 s). On the
    server's clock: a claim in an open transaction holds the queue's claim lock, a worker's
    claim waits for it (seen waiting in pg_stat_activity, not slept for), the holder reads
    the clock and commits. The waiting claim's start must come after that instant, and be
    its job's claimed_at (the instant windows are counted on)."""
    with JobStore.open(dsn) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(hours=1))
        add(store, 1, queue="api", rate_key="a")
        add(store, 2, queue="api", rate_key="b")
    claimed: list[ClaimedJob] = []
    with psycopg.connect(dsn) as holder:  # not autocommit: the claim's lock held until commit
        holder.execute("SELECT * FROM pgkick.job_claim('api', 1, '5 minutes', NULL)")

        def claim() -> None:
            with JobStore.open(dsn) as worker:
                claimed.extend(worker.claim("api", batch=1, lease=LEASE))

        waiting = threading.Thread(target=claim)
        waiting.start()
        wait_for_lock_waiters(dsn)
        (released,) = holder.execute("SELECT clock_timestamp()").fetchone()  # type: ignore[misc]
        holder.commit()
        waiting.join(30)
    assert len(claimed) == 1
    with psycopg.connect(dsn) as conn:
        start, claimed_at = conn.execute(
            "SELECT s.started_at, j.claimed_at FROM pgkick.job_starts s, pgkick.jobs j"
            " WHERE s.queue = 'api' AND j.id = %s AND s.rate_key = j.rate_key",
            (claimed[0].id,),
        ).fetchone()  # type: ignore[misc]
    assert released < start == claimed_at


def test_a_worker_held_by_the_rate_leaves_and_books_the_instant_the_window_admits(
    dsn: str, clock: FakeClock
) -> None:
    """2 starts a minute: the worker runs 2 jobs, finds the other 3 held, does not wait for
    them (it leaves at once, stopped "empty") and books its queue's wake-up at the second
    start + 60 s. Catches a worker that idles on held work (even one configured to linger
    on an empty queue), or one that leaves without a wake-up (the jobs would wait for the
    reaper)."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 2, timedelta(minutes=1))
        for n in range(5):
            add(store, n, queue="api", rate_key="host")
        tasks = Registry()
        tasks.task("t")(lambda payload: None)
        kicker = Kicker()
        worker = Worker(store, tasks, kicker, OPTIONS._replace(linger=timedelta(seconds=1)))
        slept: list[float] = []
        worker.sleep = slept.append  # a lingering worker would pause here, re-claiming
        summary = worker.drain("api", forever)
        assert (summary.done, summary.stopped_because, slept) == (2, "empty", [])
        assert kicker.wakes == [("api", clock.now + timedelta(minutes=1))]
        assert kicker.kicks == []  # held: nobody is kicked to find nothing
        clock.advance(60)
        summary = Worker(store, tasks, kicker, OPTIONS).drain("api", forever)
        assert summary.done == 2


def test_a_held_key_does_not_block_other_keys(dsn: str, clock: FakeClock) -> None:
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(seconds=30))
        for n in range(5):
            add(store, n, queue="api", rate_key="busy")
        add(store, 9, queue="api", rate_key="quiet")
        add(store, 10, queue="api")  # no key: the queue's own bucket
        assert sorted(ns(store.claim("api", batch=10, lease=LEASE))) == [0, 9, 10]
        assert store.claim("api", batch=10, lease=LEASE) == []
        clock.advance(30)
        assert ns(store.claim("api", batch=10, lease=LEASE)) == [1]


def test_a_keyless_job_is_not_held_behind_a_key_its_rate_holds(dsn: str, clock: FakeClock) -> None:
    """Catches the keyless bucket (the queue's own rate key) choosing its candidates among
    the first hundred queued jobs of every kind: with 150 jobs of a key its rate held ahead
    of it (1 start an hour), the keyless job was never a candidate, though its bucket had
    its whole rate left; and the ready check counted it, so sweeps and the reaper kicked the
    queue again and again for workers that claimed nothing (a review, migration 0031)."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(hours=1))
        store.insert_many([[job_spec({"n": n}, task="t", queue="api", rate_key="x")
                            for n in range(150)]])  # fmt: skip
        add(store, 150, queue="api")
        add(store, 151, queue="api", rate_key="y")
        assert sorted(ns(store.claim("api", batch=10, lease=LEASE))) == [0, 150, 151]
        (ready,) = store.one("SELECT pgkick.job_ready_fair_count('api', %(now)s, 10)")
        assert ready == 0  # every bucket spent its hour: nothing for a kick to find


def test_a_quiet_keys_job_waits_at_most_one_batch_behind_a_flooded_key(
    dsn: str, clock: FakeClock
) -> None:
    """Five tenants flood a queue (1,000 jobs each, concurrency 100 per key); a quiet
    tenant's single job enqueued after them is claimed by the very next batch, and every
    later quiet job too. Catches a claim in queue order (the quiet job would wait for 5,000
    jobs) or a round robin that restarts from the first key (a key after the floods would
    wait for every flood's turn)."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_concurrency(store, "t", 100)
        for tenant in "abcde":
            store.insert_many(
                [[job_spec({"n": 0}, task="t", queue="t", group=tenant) for _ in range(1_000)]]
            )
        waits = []
        for n in range(1, 6):
            store.complete_many(store.claim("t", batch=10, lease=LEASE))  # a batch in flight
            add(store, n, queue="t", group=f"quiet{n}")
            batches = 1
            while n not in ns(jobs := store.claim("t", batch=10, lease=LEASE)):
                store.complete_many(jobs)
                batches += 1
            store.complete_many(jobs)
            waits.append(batches)
        assert waits == [1] * 5


def test_concurrency_per_key_is_never_exceeded_by_racing_workers_and_keeps_group_order(
    dsn: str,
) -> None:
    """Concurrency 2 per group key, 6 workers racing over 8 groups of 30 jobs. The database
    itself checks, at each claim's commit, that no group has 3 running, and logs the claims
    in commit order: each group's jobs start in their enqueue order (two of one claim in
    either order). Catches a per-key count on a snapshot,
    and a claim that takes a group's later jobs past its first ones."""
    with JobStore.open(dsn) as store:
        store.conn.execute(
            """
            CREATE TABLE claim_log (seq bigserial PRIMARY KEY, n int NOT NULL);
            CREATE FUNCTION check_per_key() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO claim_log (n) VALUES ((NEW.payload->>'n')::int);
              IF (SELECT count(*) FROM pgkick.jobs
                  WHERE group_key = NEW.group_key AND status = 'running') > 2 THEN
                RAISE EXCEPTION 'more than 2 running in %', NEW.group_key;
              END IF;
              RETURN NULL;
            END $$;
            CREATE CONSTRAINT TRIGGER per_key_check AFTER UPDATE ON pgkick.jobs
              DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
              WHEN (NEW.status = 'running') EXECUTE FUNCTION check_per_key();
            """
        )
        flow.set_queue_concurrency(store, "default", 2)
        for n in range(240):
            add(store, n, group=f"g{n % 8}")
    errors: list[BaseException] = []
    order: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def work() -> None:
        try:
            with JobStore.open(dsn) as mine:
                barrier.wait()
                while jobs := mine.claim("default", batch=3, lease=LEASE):
                    with lock:
                        order.extend(ns(jobs))
                    mine.complete_many(jobs)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert sorted(order) == list(range(240))
    with psycopg.connect(dsn) as conn:  # the claims' commit order (they hold the claim lock)
        order = [n for (n,) in conn.execute("SELECT n FROM claim_log ORDER BY seq")]
    for g in range(8):
        mine = [n for n in order if n % 8 == g]
        assert all(abs(mine.index(n) - i) <= 1 for i, n in enumerate(sorted(mine))), mine


def test_concurrency_one_is_an_ordered_group(dsn: str, clock: FakeClock) -> None:
    """0011's ordered group under the round-robin claim: one at a time, in the run_at order
    the jobs were enqueued with, a job waiting for its retry holding its place."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_concurrency(store, "default", 1)
        add(store, 1, group="g", delay=30)  # enqueued first, due last
        add(store, 2, group="g", max_attempts=2)
        add(store, 3, group="g", delay=10)
        add(store, 4, group="h")
        first = store.claim("default", batch=10, lease=LEASE)
        assert sorted(ns(first)) == [2, 4]
        assert store.claim("default", batch=10, lease=LEASE) == []  # g and h are busy
        two = next(job for job in first if job.payload["n"] == 2)
        assert store.fail(two.id, two.attempts, "boom").status == "queued"  # retry at +20 s
        clock.advance(15)
        assert store.claim("default", batch=10, lease=LEASE) == []  # 2 holds g
        clock.advance(10)
        again = store.claim("default", batch=10, lease=LEASE)
        assert ns(again) == [2]
        store.complete_many(again)
        then = store.claim("default", batch=10, lease=LEASE)
        assert ns(then) == [3]
        store.complete_many(then)
        clock.advance(30)
        assert ns(store.claim("default", batch=10, lease=LEASE)) == [1]


def test_the_round_robin_skips_keys_at_their_concurrency_wherever_its_cursor_is(
    dsn: str,
) -> None:
    """Six groups, concurrency 1, claims of 2: the claim walks the keys from where the last
    one stopped, in one statement while the keys after its cursor fill the batch, else step
    by step with the wrap-around. Catches either walk taking a job of a group already at
    its concurrency (here: with the cursor on a, groups b..f all running)."""
    with JobStore.open(dsn) as store:
        flow.set_queue_concurrency(store, "default", 1)
        for n in range(12):
            add(store, n, group="abcdef"[n % 6])
        held = [store.claim("default", batch=2, lease=LEASE) for _ in range(3)]
        assert [ns(jobs) for jobs in held] == [[0, 1], [2, 3], [4, 5]]
        assert store.claim("default", batch=2, lease=LEASE) == []  # every group runs
        store.complete_many(held[0][:1])  # a's job: a is free
        assert ns(store.claim("default", batch=2, lease=LEASE)) == [6]  # the cursor is on a
        assert store.claim("default", batch=2, lease=LEASE) == []  # b..f, then a: all run
        store.complete_many(held[1][:1])  # c's job
        assert ns(store.claim("default", batch=2, lease=LEASE)) == [8]


INDEX_ENTRIES_READ = """
    SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid))::int
    FROM pg_index i WHERE i.indrelid = 'pgkick.jobs'::regclass"""


def test_a_groups_running_count_reads_that_groups_running_jobs_only(dsn: str) -> None:
    """A queue with a concurrency per key, 100,000 jobs in 100 groups. A worker's session
    makes its plans while no job runs; other workers then run 1,000 of the jobs (10 a
    group); that session's next claim of 10 reads about a hundred index entries. Catches
    each candidate group's running count planned (generic, kept by the session) through a
    queue-wide index of running jobs, the planner's pick while both running indexes were
    empty: every running job of the queue read again for each key of each claim (10,000
    entries here, 0.1 ms a key), before migration 0020 left one running index, on (queue,
    group_key)."""
    with JobStore.open(dsn) as store:
        flow.set_queue_concurrency(store, "t", 1_000)
        flood = [
            job_spec({"n": 0}, task="t", queue="t", group=f"g{n % 100}") for n in range(100_000)
        ]
        store.insert_many([flood])
        store.conn.execute("ANALYZE pgkick.jobs")
    with JobStore.open(dsn) as worker, JobStore.open(dsn) as others:
        worker.complete_many(worker.claim("t", batch=10, lease=LEASE))  # its plans made
        running = sum(len(others.claim("t", batch=100, lease=LEASE)) for _ in range(10))
        assert running == 1_000
        with worker.transaction():  # the entries this transaction read, through every index
            assert len(worker.claim("t", batch=10, lease=LEASE)) == 10
            row = worker.conn.execute(INDEX_ENTRIES_READ).fetchone()
    assert row is not None
    assert row[0] < 1_000, f"a claim of 10 jobs read {row[0]} index entries"


def test_a_paused_queue_stops_a_running_worker_at_its_next_claim_and_is_not_kicked(
    dsn: str,
) -> None:
    """A worker drains a queue in batches of 5; the first job it runs pauses the queue (an
    operator, on another session). The worker's next claim takes nothing: it leaves with 15
    jobs queued; a producer's enqueue does not kick the paused queue, nor does a sweep;
    resumed, the jobs are claimed again. Catches a pause read once per worker, or a
    paused queue kicked (a worker woken to find nothing)."""
    with JobStore.open(dsn) as store:
        for n in range(20):
            add(store, n, queue="mail")
        ran: list[int] = []

        def task(payload: Any) -> None:
            if not ran:
                with JobStore.open(dsn) as operator:
                    flow.pause_queue(operator, "mail")
            ran.append(payload["n"])

        tasks = Registry()
        tasks.task("t")(task)
        kicker = Kicker()
        summary = Worker(store, tasks, kicker, OPTIONS).drain("mail", forever)
        assert (summary.done, summary.stopped_because) == (5, "empty")
        assert kicker.kicks == [] and kicker.wakes == []
        assert store.reserve_kicks(["mail"], timedelta(seconds=10)) == set()  # a producer's
        assert store.ready_exists("mail") is False
        flow.resume_queue(store, "mail")
        assert store.reserve_kicks(["mail"], timedelta(seconds=10)) == {"mail"}
        assert len(store.claim("mail", batch=50, lease=LEASE)) == 15
        rows = store.conn.execute("SELECT count(*) FROM pgkick.queue_limits").fetchone()
        assert rows == (0,)  # resumed and nothing else set: the claim's plain branch again


def test_pgkick_pause_resume_and_limit_rate_concurrency_from_the_cli(
    dsn: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resume kicks the queue once (its jobs were left unkicked while it was paused)."""
    kicker = Kicker()
    monkeypatch.setattr("pgkick.kick.default._default", kicker)
    assert cli.main(["pause", "mail", "--dsn", dsn, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"paused": "mail"}
    args = ["limit", "mail", "--rate", "10/1m", "--concurrency", "3", "--dsn", dsn, "--json"]
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["limits"] == [
        {
            "queue": "mail",
            "max_running": None,
            "running": 0,
            "rate": 10,
            "rate_period_seconds": 60.0,
            "concurrency": 3,
            "paused": True,
        }
    ]
    assert cli.main(["resume", "mail", "--dsn", dsn, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"resumed": "mail", "kicked": True}
    assert kicker.kicks == [("mail", "manual")]  # a reason the worker accepts
    assert cli.main(["limit", "mail", "--no-rate", "--no-concurrency", "--dsn", dsn]) == 0
    capsys.readouterr()
    assert cli.main(["limit", "--dsn", dsn, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"limits": []}


def test_pgkick_limit_that_frees_held_jobs_kicks_the_queue_and_one_that_tightens_does_not(
    dsn: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 start a day: two of three jobs are held, their wake-up a day away. `pgkick limit q
    --no-rate` frees them and kicks q once (the kicker built first), as `resume` does; a
    rate set anew, or a lower concurrency, holds more and kicks nothing (nor says
    "kicked"); a higher concurrency frees a group's next job and kicks; the API's setters
    say which (True: the caller kicks). Catches a limit loosened with nobody woken: the
    freed jobs waited for the wake-up booked under the old rate, a day."""
    kicker = Kicker()
    monkeypatch.setattr("pgkick.kick.default._default", kicker)

    def limit(*args: str) -> dict[str, Any]:
        assert cli.main(["limit", "q", *args, "--dsn", dsn, "--json"]) == 0
        return dict(json.loads(capsys.readouterr().out))

    with JobStore.open(dsn) as store:
        flow.set_queue_rate(store, "q", 1, timedelta(days=1))
        for n in range(3):
            add(store, n, queue="q")
        store.complete_many(store.claim("q", batch=5, lease=LEASE))
        assert store.claim("q", batch=5, lease=LEASE) == []  # held for a day
        freed = limit("--no-rate")
        assert kicker.kicks == [("q", "manual")]
        assert freed["kicked"] is True
        assert "kicked" not in limit("--rate", "1/1d")  # a rate where none was: holds
        assert flow.set_queue_rate(store, "q", 1, timedelta(hours=1)) is True  # shorter
        assert flow.set_queue_rate(store, "q", 1, timedelta(hours=2)) is False
        assert flow.set_queue_rate(store, "q", None) is True
        add(store, 10, queue="q", group="g")
        add(store, 11, queue="q", group="g")
        assert limit("--concurrency", "2")["kicked"] is True  # g's second may run
        assert "kicked" not in limit("--concurrency", "1")
        assert flow.set_queue_concurrency(store, "q", None) is False
        assert kicker.kicks == [("q", "manual")] * 2
        store.conn.execute("DELETE FROM pgkick.jobs")
        assert flow.set_queue_rate(store, "q", 1, timedelta(days=1)) is False
        assert "kicked" not in limit("--no-rate")  # nothing queued: nothing held
    assert kicker.kicks == [("q", "manual")] * 2


@pytest.mark.parametrize(
    "args",
    [
        ["--rate", "0/1m"],
        ["--rate", "-1/1m"],
        ["--rate", "ten/1m"],
        ["--rate", "10"],
        ["--rate", "10/0s"],
        ["--rate", "10/2d"],
        ["--rate", "10/1y"],
        ["--rate", "99999999999/1m"],
        ["--concurrency", "0"],
        ["--concurrency", "-2"],
        ["--rate", "5/1m", "--no-rate"],
    ],
)
def test_bad_limits_are_refused_before_anything_is_written(
    dsn: str, capsys: Any, args: list[str]
) -> None:
    try:
        code = cli.main(["limit", "api", *args, "--dsn", dsn])
    except SystemExit as exc:  # argparse refuses a bad --rate or --concurrency itself
        code = exc.code
    assert code in (1, 2)
    assert capsys.readouterr().err.strip()
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgkick.queue_limits").fetchone() == (0,)


@pytest.mark.parametrize(
    ("limit", "period", "error"),
    [
        (0, timedelta(minutes=1), InvalidArgument),
        (-3, timedelta(minutes=1), InvalidArgument),
        ("10", timedelta(minutes=1), InvalidArgumentType),
        (1.5, timedelta(minutes=1), InvalidArgumentType),
        (True, timedelta(minutes=1), InvalidArgumentType),
        (10, timedelta(0), InvalidArgument),
        (10, timedelta(milliseconds=500), InvalidArgument),
        (10, timedelta(days=2), InvalidArgument),
        (10, 60, InvalidArgumentType),
        (10, None, InvalidArgumentType),
    ],
)
def test_bad_rates_and_concurrencies_are_refused_by_the_api(
    dsn: str, limit: Any, period: Any, error: type[Exception]
) -> None:
    with JobStore.open(dsn) as store:
        with pytest.raises(error, match="rate"):
            flow.set_queue_rate(store, "api", limit, period)
        with pytest.raises(InvalidArgument, match="concurrency"):
            flow.set_queue_concurrency(store, "api", 0)
        with pytest.raises(InvalidArgument, match="rate_key"):
            job_spec({}, task="t", rate_key="")
        rows = store.conn.execute("SELECT count(*) FROM pgkick.queue_limits").fetchone()
        assert rows == (0,)


def test_a_queue_held_by_its_rate_is_neither_handed_over_nor_kicked_by_the_reaper(
    dsn: str, clock: FakeClock
) -> None:
    """1 start per 30 s a key: once each key has started its job, the queue's other jobs
    are all held. The worker's hand-over check (ready_exists) says no work and the reaper
    kicks nothing (a worker kicked would find nothing; the sweep books the wake-up); a
    new key's job, or the window moving on, is claimable again. A plain queue beside it
    keeps its count. Catches ready checks that count ready jobs without their rate."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(seconds=30))
        for n in range(3):
            add(store, n, queue="api", rate_key="busy")
        add(store, 9, queue="api")  # no key: the queue's own bucket
        add(store, 20, queue="plain")
        add(store, 21, queue="plain")
        assert sorted(ns(store.claim("api", batch=10, lease=LEASE))) == [0, 9]
        add(store, 10, queue="api")  # the queue's bucket has started its one job
        assert store.ready_exists("api") is False
        assert store.ready_by_queue() == {"plain": 2}
        kicker = Kicker()
        reap(store, kicker, retention=timedelta(days=7))
        assert [queue for queue, _ in kicker.kicks] == ["plain"]
        add(store, 11, queue="api", rate_key="quiet")
        assert store.ready_exists("api") is True
        assert store.ready_by_queue() == {"api": 1, "plain": 2}
        assert ns(store.claim("api", batch=10, lease=LEASE)) == [11]
        assert store.ready_exists("api") is False
        clock.advance(30)
        assert store.ready_exists("api") is True
        assert store.ready_by_queue() == {"api": 2, "plain": 2}  # busy's key, the bucket's job


def test_a_queue_held_by_its_concurrency_is_neither_handed_over_nor_kicked(
    dsn: str, clock: FakeClock
) -> None:
    """Concurrency 2: a group with two running jobs holds its third; a group whose next
    job in its order is not due holds its place (0011's head rule, N at a time). Catches
    ready checks that know one running job a group, not N."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_concurrency(store, "c", 2)
        for n in range(3):
            add(store, n, queue="c", group="g")
        running = store.claim("c", batch=10, lease=LEASE)
        assert ns(running) == [0, 1]
        add(store, 5, queue="c", group="h", delay=60)  # h's head: due in a minute
        add(store, 6, queue="c", group="h")
        assert ns(store.claim("c", batch=10, lease=LEASE)) == [6]  # h runs 1 of 2
        assert store.ready_exists("c") is False  # g is full, h's next (5) is not due
        assert store.ready_by_queue() == {}
        kicker = Kicker()
        reap(store, kicker, retention=timedelta(days=7))
        assert kicker.kicks == []
        store.complete_many(running[:1])
        assert store.ready_exists("c") is True
        assert store.ready_by_queue() == {"c": 1}
        assert ns(store.claim("c", batch=10, lease=LEASE)) == [2]
        assert store.ready_exists("c") is False


def test_a_rate_held_keys_wake_up_is_booked_whatever_holds_the_queues_other_jobs(
    dsn: str, clock: FakeClock
) -> None:
    """1 start a minute a key: key host's second job is held for 60 s, and the worker leaves
    it booking a wake-up at +60 s, though the queue's other ready job (a group's follower,
    its own rate key unstarted) is held by something else: in "api" its group's head is
    not due for an hour, in "busy" its group runs its one job in another session. Catches
    a sweep that took every ready job's rate key, the follower's included: that key's room
    said "now" and hid host's instant (the wake-up fell at the head's run_at, +1 h, or was
    not booked at all, host's job waiting for the other session's job to end)."""
    with JobStore.open(dsn, clock) as store, JobStore.open(dsn, clock) as other:
        for queue in ("api", "busy"):
            flow.set_queue_rate(store, queue, 1, timedelta(minutes=1))
        flow.set_queue_concurrency(store, "busy", 1)
        add(store, 0, queue="api", group="g", rate_key="x", priority=5, delay=3600)  # g's head
        add(store, 1, queue="api", group="g", rate_key="y")
        add(store, 2, queue="busy", group="g", rate_key="x")
        add(store, 3, queue="busy", group="g", rate_key="y")
        assert ns(other.claim("busy", batch=1, lease=LEASE)) == [2]  # runs on, elsewhere
        for queue in ("api", "busy"):
            add(store, 10, queue=queue, rate_key="host")
            add(store, 11, queue=queue, rate_key="host")
        tasks = Registry()
        tasks.task("t")(lambda payload: None)
        for queue in ("api", "busy"):
            kicker = Kicker()
            summary = Worker(store, tasks, kicker, OPTIONS).drain(queue, forever)
            assert (summary.done, summary.stopped_because) == (1, "empty")
            assert (queue, clock.now + timedelta(minutes=1)) in kicker.wakes
            assert min(when for _, when in kicker.wakes) == clock.now + timedelta(minutes=1)
        clock.advance(60)
        assert ns(store.claim("api", batch=10, lease=LEASE)) == [11]
        assert ns(store.claim("busy", batch=10, lease=LEASE)) == [11]


def test_a_queue_whose_ready_jobs_are_all_held_is_not_kicked_by_another_workers_sweep(
    dsn: str, clock: FakeClock
) -> None:
    """Key host's second job is held by its rate, group g's follower by its head (not due
    for an hour): a worker leaving another queue books "api"'s wake-up at host's instant
    and does not kick it, as the reaper's count says (a worker kicked there claims
    nothing). Catches a sweep that decided "ready" by the plain queue's rule (an ungrouped
    ready job) and let the follower's unstarted rate key say the rate had room."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(minutes=1))
        add(store, 0, queue="api", group="g", rate_key="x", priority=5, delay=3600)  # g's head
        add(store, 1, queue="api", group="g", rate_key="y")
        add(store, 10, queue="api", rate_key="host")
        add(store, 11, queue="api", rate_key="host")
        store.complete_many(store.claim("api", batch=10, lease=LEASE))  # host's first
        assert store.ready_by_queue() == {}
        assert store.claim("api", batch=10, lease=LEASE) == []
        add(store, 20, queue="other")
        tasks = Registry()
        tasks.task("t")(lambda payload: None)
        kicker = Kicker()
        assert Worker(store, tasks, kicker, OPTIONS).drain("other", forever).done == 1
        assert kicker.kicks == []
        assert kicker.wakes == [("api", clock.now + timedelta(minutes=1))]


def test_pgkick_enqueue_rate_key_is_counted_by_the_queues_rate(
    dsn: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pgkick enqueue --rate-key` names the job's rate key: with 1 start a minute a key,
    two jobs of key a and one of key b claim a's first and b's. An empty key is refused,
    nothing written. Catches a flag dropped on its way to the producer."""
    monkeypatch.setattr("pgkick.kick.default._default", Kicker())
    with JobStore.open(dsn) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(minutes=1))
        for n, key in ((0, "a"), (1, "a"), (2, "b")):
            args = ["enqueue", "noop", "--payload", json.dumps({"n": n}), "--queue", "api"]
            assert cli.main([*args, "--rate-key", key, "--dsn", dsn, "--wait", "0"]) == 0
        assert cli.main(["enqueue", "noop", "--queue", "api", "--rate-key", "", "--dsn", dsn]) == 2
        assert "rate_key" in capsys.readouterr().err
        keys = store.conn.execute("SELECT rate_key FROM pgkick.jobs ORDER BY id").fetchall()
        assert keys == [("a",), ("a",), ("b",)]
        assert sorted(ns(store.claim("api", batch=10, lease=LEASE))) == [0, 2]


def test_the_fast_walk_skips_a_rate_keyed_first_job_not_yet_due(dsn: str, clock: FakeClock) -> None:
    """A key's first job in its order (priority 5) is due in a minute, its second is due:
    the one-statement walk (a batch it fills) takes the second, never the first early."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 10, timedelta(minutes=1))
        add(store, 0, queue="api", rate_key="a", priority=5, delay=60)
        add(store, 1, queue="api", rate_key="a")
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [1]
        assert store.claim("api", batch=1, lease=LEASE) == []
        clock.advance(60)
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [0]


def test_groups_sharing_a_rate_key_start_it_no_more_than_its_rate(
    dsn: str, clock: FakeClock
) -> None:
    """Two groups whose heads share one rate key (1 start a minute): the one-statement walk
    finds both heads, each under its rate when counted alone, and fills the batch of 2; the
    claim must see that the batch starts one rate key twice and take one. Catches a fast
    path that trusts each head's own count (the batch's rate keys not checked distinct);
    and a key is not held by its rate once its window has passed."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(minutes=1))
        flow.set_queue_concurrency(store, "api", 1)
        add(store, 0, queue="api", group="g1", rate_key="host")
        add(store, 1, queue="api", group="g2", rate_key="host")
        assert ns(store.claim("api", batch=2, lease=LEASE)) == [0]
        assert store.claim("api", batch=2, lease=LEASE) == []
        clock.advance(61)
        assert ns(store.claim("api", batch=2, lease=LEASE)) == [1]


def _starts(store: JobStore) -> list[tuple[str, str]]:
    rows = store.conn.execute("SELECT queue, rate_key FROM pgkick.job_starts ORDER BY 1, 2")
    return [(queue, key) for queue, key in rows.fetchall()]


def _start_ages(store: JobStore, clock: FakeClock) -> list[tuple[str, int]]:
    return [(key, age) for key, _, age in _numbered_starts(store, clock)]


def test_a_claim_prunes_the_old_starts_of_the_keys_it_starts_and_no_others(
    dsn: str, clock: FakeClock
) -> None:
    """Rate 2 per 30 s: a key that starts again loses its starts older than two periods (its
    start 65 s old goes; one 45 s old, which no window counts but a claim with an older now
    could, stays), a key that does not start keeps all of its starts, and the new start is
    written; in the one-statement walk (a batch it fills) and in the step-by-step one (a
    batch it does not). A queue with a concurrency and no rate writes no start at all.
    Catches a rewrite of the claim's writes that loses the prune, prunes every key, or
    records starts for a queue without a rate."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 2, timedelta(seconds=30))
        add(store, 0, queue="api", rate_key="a")
        add(store, 1, queue="api", rate_key="b")
        assert sorted(ns(store.claim("api", batch=5, lease=LEASE))) == [0, 1]
        clock.advance(20)
        add(store, 2, queue="api", rate_key="a")
        assert ns(store.claim("api", batch=5, lease=LEASE)) == [2]
        clock.advance(45)
        add(store, 3, queue="api", rate_key="a")
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [3]  # fills its batch of 1
        assert _start_ages(store, clock) == [("a", 45), ("a", 0), ("b", 65)]
        clock.advance(20)
        add(store, 4, queue="api", rate_key="a")
        assert ns(store.claim("api", batch=5, lease=LEASE)) == [4]  # the step-by-step walk
        assert _start_ages(store, clock) == [("a", 20), ("a", 0), ("b", 85)]

        flow.set_queue_concurrency(store, "c", 2)
        add(store, 5, queue="c", group="g")
        add(store, 6, queue="c", group="h")
        assert sorted(ns(store.claim("c", batch=2, lease=LEASE))) == [5, 6]
        assert store.conn.execute(
            "SELECT count(*) FROM pgkick.job_starts WHERE queue = 'c'"
        ).fetchone() == (0,)


def _numbered_starts(store: JobStore, clock: FakeClock) -> list[tuple[str, int, int]]:
    rows = store.conn.execute(
        "SELECT rate_key, seq, started_at FROM pgkick.job_starts ORDER BY rate_key, seq"
    )
    return [(key, seq, round((clock.now - at).total_seconds())) for key, seq, at in rows.fetchall()]


def test_a_keys_starts_are_numbered_in_the_order_of_their_times(dsn: str, clock: FakeClock) -> None:
    """The claim counts a key's window from its starts' numbers (migration 0022), which holds
    only if numbers and times rise together. A claim whose now is 10 s older than the key's
    last start (its transaction began before the claim that took the queue's lock first)
    records its start at that last start's time, with the next number; two starts of one key
    in one claim take two numbers. The rate (3 a minute) then holds the fourth start until
    the minute after those recorded times. Catches a claim that records its own older time
    (numbers and times in two orders: a window counted from them is wrong), that numbers a
    key's starts from 1 again, or gives a batch's starts one number."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 3, timedelta(minutes=1))
        clock.advance(-30)  # due before any claim's now
        for n in range(5):
            add(store, n, queue="api", rate_key="a")
        clock.advance(30)
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [0]
        clock.advance(-10)
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [1]
        add(store, 9, queue="api", rate_key="b")
        clock.advance(20)
        assert sorted(ns(store.claim("api", batch=5, lease=LEASE))) == [2, 9]
        assert _numbered_starts(store, clock) == [
            ("a", 1, 10),
            ("a", 2, 10),
            ("a", 3, 0),
            ("b", 1, 0),
        ]
        clock.advance(45)  # 55 s after the first start: 3 starts recorded in the minute
        assert store.claim("api", batch=5, lease=LEASE) == []  # (at its own time, 2: a third)
        clock.advance(6)  # the two starts recorded at the first's time leave the minute
        assert sorted(ns(store.claim("api", batch=5, lease=LEASE))) == [3, 4]
        starts = [seq for key, seq, _ in _numbered_starts(store, clock) if key == "a"]
        assert starts == [1, 2, 3, 4, 5]


def test_a_rate_check_reads_one_or_two_of_a_keys_starts_however_many_its_window_holds(
    dsn: str, clock: FakeClock
) -> None:
    """A key started 100 times in its window (rate 1,000 an hour): the claim that checks it
    again, in its one-statement walk and in its step-by-step one, reads one of the starts
    index's entries (the key's last start, whose fact leaves it room: migration 0023), and
    the ready check (job_ready_fair_count: the hand-over's and the reaper's) two (the key's
    last, the window's first), counted by the server for each transaction. Catches either
    walk or the ready check reading the key's window row by row again (100 entries and
    more: the claim's cost grew ~1.3 us with each start in a key's window), and either walk
    probing the window's first start where the fact leaves room (two)."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1_000, timedelta(hours=1))
        for n in range(101):
            add(store, n, queue="api", rate_key="a")
        for _ in range(10):
            assert len(store.claim("api", batch=10, lease=LEASE)) == 10
        add(store, 0, queue="api", rate_key="0")  # taken next: the round robin's cursor at
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [0]  # "0", so the claim below
        clock.advance(1)  # finds key a in its one-statement walk (not the step-by-step one)
        claimed, read = _starts_entries_read(
            store, lambda: store.claim("api", batch=1, lease=LEASE)
        )
        assert ns(claimed) == [100] and read <= 1, read
        add(store, 101, queue="api", rate_key="a")  # the cursor at a: the step-by-step walk
        claimed, read = _starts_entries_read(
            store, lambda: store.claim("api", batch=1, lease=LEASE)
        )
        assert ns(claimed) == [101] and read <= 1, read
        add(store, 102, queue="api", rate_key="a")  # the ready checks count the same way
        ready, read = _starts_entries_read(store, lambda: store.ready_exists("api"))
        assert ready is True and read <= 2, read


def test_a_key_with_room_under_its_rate_is_checked_without_probing_its_window(
    dsn: str, clock: FakeClock
) -> None:
    """Rate 5 an hour (migration 0023): each start records a fact about its key's numbers,
    and a claim whose window that fact covers, leaving the key room, reads the key's last
    start only (one index entry); where the fact leaves no room it probes the window's
    first start too, and holds the key exactly at the rate (in the step-by-step walk: a
    batch of 5 it does not fill, whose second job of the key counts the first); after the
    hour a probe finds the window empty and records a fact that leaves room again. Catches
    a claim that probes at every check (two entries where one will do, in the one-statement
    walk), and one that trusts a fact past the rate (a sixth start in the hour)."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 5, timedelta(hours=1))
        for n in range(8):
            add(store, n, queue="api", rate_key="a")
        for n in range(4):  # the one-statement walk: one start each, numbers 1..4
            _lap_restarted(store)
            claimed, read = _starts_entries_read(
                store, lambda: store.claim("api", batch=1, lease=LEASE)
            )
            assert ns(claimed) == [n] and read <= 1, (n, read)
            clock.advance(1)
        # the step-by-step walk, room for one more: its second job of the key counts the first
        assert ns(store.claim("api", batch=5, lease=LEASE)) == [4]
        assert store.claim("api", batch=1, lease=LEASE) == []  # no room by the fact: probed
        clock.advance(3_600)  # the first starts leave the window: probed, the key has room
        _lap_restarted(store)
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [5]
        _lap_restarted(store)
        claimed, read = _starts_entries_read(  # the fact that probe recorded leaves room
            store, lambda: store.claim("api", batch=1, lease=LEASE)
        )
        assert ns(claimed) == [6] and read <= 1, read


def test_a_starts_fact_is_not_trusted_for_a_window_it_does_not_cover(
    dsn: str, clock: FakeClock
) -> None:
    """A fact says which numbers a key's starts after some time have; a window reaching back
    before that time may hold more. Rate 5 an hour: five starts, then after the hour a probe
    records the fact "the starts after an hour ago are numbered 6 or above", and a sixth
    start; the queue's period then grows to three hours, whose window holds all six. Catches
    a claim that trusts the fact for a window it does not cover (one start counted, a
    seventh start made), in either walk."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 5, timedelta(hours=1))
        for n in range(8):
            add(store, n, queue="api", rate_key="a")
        assert len(store.claim("api", batch=5, lease=LEASE)) == 5
        clock.advance(3_601)
        assert ns(store.claim("api", batch=1, lease=LEASE)) == [5]
        flow.set_queue_rate(store, "api", 5, timedelta(hours=3))
        _lap_restarted(store)
        assert store.claim("api", batch=1, lease=LEASE) == []  # the one-statement walk
        assert store.claim("api", batch=5, lease=LEASE) == []  # the step-by-step one


def test_a_random_walk_of_claims_clocks_and_rates_never_starts_a_key_past_its_rate(
    dsn: str, clock: FakeClock
) -> None:
    """Claims of random batches on keyed, grouped and unkeyed jobs, a clock moved back and
    forth (claims with a now older than a key's last start), the rate and the period changed
    on the way, completions freeing the groups' concurrency: after every claim, each bucket
    it started holds at most the rate's N starts after its now minus the period (the rule,
    counted on the starts table). A fixed seed: the same walk every run. Catches a window
    fact trusted where it should not be, or a count off by one, in paths the hand-made
    tests do not line up (the walks, both laps, the unkeyed bucket, several starts of a
    key in one claim)."""
    rng = random.Random(20261204)
    rate, period = 3, 60
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", rate, timedelta(seconds=period))
        flow.set_queue_concurrency(store, "api", 2)
        running: list[ClaimedJob] = []
        started = at_rate = 0
        for step in range(600):
            roll = rng.random()
            if roll < 0.3:
                fields: dict[str, Any] = {"queue": "api"}
                kind = rng.choice(["rate", "rate", "group", "both", "none"])
                if kind in ("rate", "both"):
                    fields["rate_key"] = rng.choice("abc")
                if kind in ("group", "both"):
                    fields["group"] = rng.choice(["g1", "g2"])
                add(store, step, **fields)
            elif roll < 0.65:
                before = _last_numbers(store)
                claimed = store.claim("api", batch=rng.randint(1, 4), lease=LEASE)
                running += claimed
                started += len(claimed)
                keys = [k for k, seq in _last_numbers(store).items() if before.get(k) != seq]
                in_window = store.conn.execute(
                    "SELECT rate_key, count(*) FROM pgkick.job_starts WHERE queue = 'api'"
                    " AND rate_key = ANY (%s) AND started_at > %s GROUP BY rate_key",
                    (keys, clock.now - timedelta(seconds=period)),
                ).fetchall()
                assert all(n <= rate for _, n in in_window), (step, rate, period, in_window)
                at_rate += any(n == rate for _, n in in_window)
            elif roll < 0.8 and running:
                rng.shuffle(running)
                cut = rng.randint(1, len(running))
                store.complete_many(running[:cut])
                running = running[cut:]
            elif roll < 0.97:
                clock.advance(rng.choice([-15, -5, 1, 5, 10, 20, 40, 70]))
            else:
                rate, period = rng.randint(1, 4), rng.choice([30, 60, 90])
                flow.set_queue_rate(store, "api", rate, timedelta(seconds=period))
        assert started > 100  # the walk did claim (146 starts with this seed)
        assert at_rate >= 20  # and often up to the rate itself (34 claims), never past it


def _last_numbers(store: JobStore) -> dict[str, int]:
    """Each rate bucket's last start number: the buckets a claim started are those it moved."""
    rows = store.conn.execute(
        "SELECT rate_key, max(seq) FROM pgkick.job_starts WHERE queue = 'api' GROUP BY 1"
    )
    return dict(rows.fetchall())


def _lap_restarted(store: JobStore) -> None:
    """The round robin's cursor forgotten, as before a queue's first claim: the next claim's
    one-statement walk starts at the first key (a cursor at a queue's only key sends every
    claim to the step-by-step walk)."""
    store.conn.execute("DELETE FROM pgkick.queue_claim_cursors")


def _starts_entries_read[T](store: JobStore, call: Callable[[], T]) -> tuple[T, int]:
    """What `call` returned, and the entries of the starts' index it read: the server's
    count for this backend, taken before and after within one transaction (its pending
    counts are flushed only after a transaction ends)."""
    entries = "SELECT pg_stat_get_xact_tuples_returned('pgkick.job_starts_key_idx'::regclass)"
    with store.conn.transaction():
        before = store.conn.execute(entries).fetchone()
        result = call()
        after = store.conn.execute(entries).fetchone()
    assert before is not None and after is not None
    return result, after[0] - before[0]


def test_the_reaper_forgets_the_starts_of_keys_gone_quiet(dsn: str, clock: FakeClock) -> None:
    """A claim prunes only the keys it starts, so a tenant that never starts again kept its
    starts for ever (one table row per start, per key ever seen). The reaper drops the starts
    older than two of their queue's periods, and those of a queue whose rate was removed
    (its concurrency kept, so its limits row stays); the starts a window still counts stay,
    and the key they hold is still held after the purge."""
    with JobStore.open(dsn, clock) as store:
        flow.set_queue_rate(store, "api", 1, timedelta(seconds=30))
        flow.set_queue_rate(store, "other", 1, timedelta(seconds=30))
        flow.set_queue_concurrency(store, "other", 2)
        add(store, 0, queue="api", rate_key="gone")
        add(store, 1, queue="other", rate_key="x")
        assert ns(store.claim("api", batch=5, lease=LEASE)) == [0]
        assert ns(store.claim("other", batch=5, lease=LEASE)) == [1]
        clock.advance(45)
        add(store, 2, queue="api", rate_key="recent")
        add(store, 3, queue="api", rate_key="recent")
        assert ns(store.claim("api", batch=5, lease=LEASE)) == [2]
        clock.advance(20)  # gone's start is 65 s old (over 2 x 30 s); recent's is 20 s old
        flow.set_queue_rate(store, "other", None)
        assert _starts(store) == [("api", "gone"), ("api", "recent"), ("other", "x")]
        report = reap(store, Kicker(), retention=timedelta(days=7))
        assert report["purged_starts"] == 2
        assert _starts(store) == [("api", "recent")]
        assert store.claim("api", batch=5, lease=LEASE) == []  # recent's window still holds 3
        assert reap(store, Kicker(), retention=timedelta(days=7))["purged_starts"] == 0
