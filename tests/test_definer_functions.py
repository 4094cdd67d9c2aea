"""The functions a producer calls with their owner's rights (SECURITY DEFINER: job_await,
job_insert_flow) touch only rows that are the caller's to touch, called directly in SQL as
any role granted EXECUTE may call them, not only through pgkick's client (migration 0026)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

import pgkick
from pgkick.kick.kickers import NoKicker
from pgkick.store import queries
from pgkick.store.maintenance import MaintenanceStore
from pgkick.variables import VARIABLES
from pgkick.worker.healing import heal_queues
from tests.helpers import job_row
from tests.test_producer import RecordingKicker
from tests.test_security import login_as  # noqa: F401 (a fixture)

AWAIT = "SELECT * FROM pgkick.job_await(%s, %s, %s, NULL)"
FLOW = (
    "SELECT * FROM pgkick.job_insert_flow(%(queue)s, %(task)s, %(payload)s, NULL,"
    " '0'::interval, 3, 0, NULL, %(key)s, NULL, NULL, %(debounce)s::interval, NULL,"
    " %(throttle)s::interval, NULL)"
)


def other_apps_job(dsn: str, **options: object) -> int:
    return pgkick.enqueue_and_kick(
        {"card": "4111"}, task="charge", queue="billing", dsn=dsn, kicker=NoKicker(), **options
    )


def test_a_job_flagged_as_a_parent_is_never_taken_as_a_child(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
) -> None:
    """Catches 0024's check fooled by job_await's own flag: naming another app's job as a
    parent writes its row (has_dependants), which made its last writer the caller's
    transaction, and the next call took it as a child: held 'waiting' for ever behind the
    caller's own job, or failed with the caller's failed job's error."""
    victim = other_apps_job(dsn)
    with psycopg.connect(login_as["producer"]) as app:
        own = pgkick.enqueue_in(app, kicker=NoKicker()).enqueue({}, task="t", delay=3600)
        assert app.execute(AWAIT, ([own], [victim], ["run anyway"])).fetchall() == [(own,)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not enqueued in this"):
            app.execute(AWAIT, ([victim], [own], ["fail"]))
    assert job_row(dsn, victim)["status"] == "queued"


def test_a_job_a_debounce_just_rewrote_is_never_taken_as_a_child(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
) -> None:
    """Catches 0026's first form, which a review broke: a debounce of another app's key (its
    queue and task known or guessed) rewrites that job's row, whose last writer is then the
    caller's transaction, and job_await took it as a child and failed it. A child must have
    been made at the transaction's start (created_at) as well."""
    victim = other_apps_job(dsn, unique_key="invoice-7")
    with psycopg.connect(login_as["producer"]) as app:
        own = pgkick.enqueue_in(app, kicker=NoKicker()).enqueue({}, task="t", delay=3600)
        app.execute(
            FLOW,
            {"queue": "billing", "task": "charge", "payload": "{}", "key": "invoice-7",
             "debounce": "1 hour", "throttle": None},
        )  # fmt: skip
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not enqueued in this"):
            app.execute(AWAIT, ([victim], [own], ["fail"]))
    assert job_row(dsn, victim)["status"] == "queued"


def test_the_flow_function_takes_a_callers_clock_only_from_its_owner(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
) -> None:
    """Catches a producer naming the function's clock (f_now, there for tests): a debounce
    with a clock years ahead set the held job's due time as far. The owner's session (the
    tests', the migrating role's) keeps it."""
    future = "2999-01-01 00:00:00+00"
    call = FLOW.replace("NULL)", "%(now)s::timestamptz)")
    params = {"queue": "q", "task": "t", "payload": "{}", "debounce": "1 s", "throttle": None}
    with psycopg.connect(login_as["producer"]) as app:
        (job_id, *_rest) = app.execute(call, {**params, "key": "a", "now": future}).fetchone()
    assert job_row(dsn, job_id)["run_at"].year < 2999
    with psycopg.connect(dsn) as owner:
        (job_id, *_rest) = owner.execute(call, {**params, "key": "b", "now": future}).fetchone()
    assert job_row(dsn, job_id)["run_at"].year == 2999


def test_a_debounce_rewrites_only_a_job_of_its_own_queue_and_task(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
) -> None:
    """Catches a debounce matching the key alone: another app's job holding the key (its
    keys are readable) got the caller's payload and due time. The holder answers,
    untouched, as it does a plain unique enqueue; a burst of the same task still collapses."""
    victim = other_apps_job(dsn, unique_key="invoice-42")
    before = job_row(dsn, victim)
    answer = pgkick.enqueue_and_kick(
        {"card": "attacker"},
        task="mine",
        unique_key="invoice-42",
        debounce=3600,
        dsn=login_as["producer"],
        kicker=NoKicker(),
    )
    after = job_row(dsn, victim)
    assert answer == victim
    assert (after["payload"], after["run_at"]) == (before["payload"], before["run_at"])
    again = pgkick.enqueue_and_kick(
        {"n": 2}, task="charge", queue="billing", unique_key="invoice-42", debounce=60,
        dsn=login_as["producer"], kicker=NoKicker(),
    )  # fmt: skip
    assert again == victim and job_row(dsn, victim)["payload"] == {"n": 2}


@pytest.mark.parametrize(
    ("payload", "debounce", "throttle"),
    [(None, "1 s", None), ("{}", "-1 s", None), ("{}", None, "0 s"), ("{}", "31 days", None)],
    ids=["null-payload", "negative-debounce", "zero-throttle", "past-30-days"],
)
def test_the_flow_function_refuses_what_the_client_refuses_before_any_write(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
    payload: str | None,
    debounce: str | None,
    throttle: str | None,
) -> None:
    """Catches the function trusting its caller: a NULL payload failed the debounce's update
    of the key's job with "Failing row contains (...)", that job's columns read with the
    owner's rights; a period of zero, below zero or past 30 days went through."""
    victim = other_apps_job(dsn, unique_key="k")
    params = {"queue": "billing", "task": "charge", "key": "k", "payload": payload}
    with psycopg.connect(login_as["producer"]) as app:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
            app.execute(FLOW, {**params, "debounce": debounce, "throttle": throttle})
    assert "4111" not in str(refused.value) and refused.value.diag.message_detail is None
    assert job_row(dsn, victim)["payload"] == {"card": "4111"}


@pytest.mark.parametrize("watcher", ["zz", "kick"], ids=["fake-worker", "fake-pending-kick"])
def test_a_watcher_row_no_worker_writes_holds_no_kick_back(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
    watcher: str,
) -> None:
    """Catches a producer's own row in queue_watchers (it may write the table: it reserves
    kicks there) with an `until` no worker or reservation ever writes (past an hour: the
    longest PGKICK_WATCH_SECONDS and PGKICK_KICK_PENDING_MS allow): every reservation and
    every sweep took the queue as watched, and a worker's announcement never cleared it, so
    its jobs waited for the daily reaper."""
    with psycopg.connect(login_as["producer"], autocommit=True) as app:
        app.execute(
            "INSERT INTO pgkick.queue_watchers (queue, watcher, until)"
            " VALUES ('billing', %s, 'infinity')",
            (watcher,),
        )
    kicker = RecordingKicker()
    pgkick.enqueue_and_kick({}, task="charge", queue="billing", dsn=dsn, kicker=kicker)
    assert kicker.kicks == [("billing", "enqueue")]
    with MaintenanceStore.open(dsn) as store:  # the reservation's row gone: a sweep kicks
        store.execute(queries.QUEUE_WATCHER_WITHDRAW, queue="billing", watcher="kick")
        swept = heal_queues(store, RecordingKicker(), pending=timedelta(seconds=10))
        assert swept.kicked == ["billing"]
        store.execute(queries.QUEUE_WATCHER_WITHDRAW, queue="billing", watcher="kick")
        store.execute(
            queries.QUEUE_WATCHER_ANNOUNCE, queue="billing", watcher="w1", ttl=timedelta(seconds=30)
        )
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT watcher FROM pgkick.queue_watchers ORDER BY 1").fetchall()
    assert left == [("w1",)]  # the announcement cleared the row nobody could have written


def test_the_watchers_hour_is_the_longest_announcement_or_reservation_there_is() -> None:
    """Catches PGKICK_WATCH_SECONDS or PGKICK_KICK_PENDING_MS allowed past an hour while the
    statements take a watcher more than two hours ahead as none of pgkick's (an hour of margin:
    a reader's now(), its transaction's start, may be earlier than the writer's): a worker's own
    announcement (or a reservation) would then be ignored and cleared."""
    longest = {v.name: v for v in VARIABLES}
    assert longest["PGKICK_WATCH_SECONDS"].high == 3600  # seconds
    assert longest["PGKICK_KICK_PENDING_MS"].high == 3_600_000  # milliseconds
    for name in ("QUEUE_KICK_RESERVE", "QUEUE_HEAL_PLAN", "QUEUE_WATCHER_ANNOUNCE"):
        assert "interval '2 hours'" in getattr(queries, name), name
