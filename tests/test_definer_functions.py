"""The functions a producer calls with their owner's rights (SECURITY DEFINER: job_await,
job_insert_flow) touch only rows that are the caller's to touch, called directly in SQL as
any role granted EXECUTE may call them, not only through pgkick's client (migration 0026);
no caller's temporary object is theirs (pg_temp last in every function's path, 0025); a
producer reserves and releases kicks only through queue_kick_reserve and _release, with no
right on the presence table itself (0027); and a row a worker writes there holds no kick
back for long."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable
from datetime import timedelta

import psycopg
import pytest

import pgkick
from pgkick.kick.kickers import NoKicker
from pgkick.store import queries
from pgkick.store.maintenance import MaintenanceStore
from pgkick.store.migration_scripts import MIGRATIONS
from pgkick.variables import VARIABLES
from pgkick.worker.healing import heal_queues
from tests.helpers import job_row
from tests.store import JobStore
from tests.test_producer import RecordingKicker
from tests.test_security import login_as  # noqa: F401 (a fixture)

AWAIT = "SELECT * FROM pgkick.job_await(%s, %s, %s, NULL)"
FLOW = (
    "SELECT * FROM pgkick.job_insert_flow(%(queue)s, %(task)s, %(payload)s, NULL,"
    " '0'::interval, 3, 0, NULL, %(key)s, NULL, NULL, %(debounce)s::interval, NULL,"
    " %(throttle)s::interval, NULL)"
)


def migrate_only(dsn: str, versions: Iterable[int], *, path: str = "pgkick, pg_temp") -> None:
    """Apply these migrations alone, in one transaction, as `pgkick migrate` would but without
    the role set-up it runs again when pgkick's roles exist (and with the search path given:
    before 0025, the schema alone)."""
    wanted = set(versions)
    with JobStore.open(dsn) as store, store.transaction():
        store.create_schema()
        store.set_migration_path(path)
        store.create_migration_table()
        for version, name, script in MIGRATIONS:
            if version in wanted:
                store.apply_migration(version, name, script)


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
    """Catches a row in queue_watchers written by a role that may write the table (a worker,
    and before migration 0027 a producer) with an `until` no worker or reservation ever
    writes (past an hour: the longest PGKICK_WATCH_SECONDS and PGKICK_KICK_PENDING_MS allow):
    every reservation and every sweep took the queue as watched, and a worker's announcement
    never cleared it, so its jobs waited for the daily reaper."""
    with psycopg.connect(login_as["worker"], autocommit=True) as app:
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


WATCHERS = "SELECT queue, watcher, until - now() FROM pgkick.queue_watchers ORDER BY 1, 2"


@pytest.mark.parametrize(
    "write",
    [
        "INSERT INTO pgkick.queue_watchers (queue, watcher, until) VALUES ('q', 'zz', now())",
        "UPDATE pgkick.queue_watchers SET until = 'infinity'",
        "DELETE FROM pgkick.queue_watchers",
        "SELECT * FROM pgkick.queue_watchers",
    ],
    ids=["insert", "update", "delete", "select"],
)
def test_a_producer_has_no_right_on_the_watchers_table(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
    write: str,
) -> None:
    """Catches the producer's direct rights on queue_watchers (it reserved its kicks by
    writing the table before migration 0027): it could write a fake watcher or pending kick
    holding a queue's kicks back for two hours, or delete a lingering worker's announcement."""
    with psycopg.connect(login_as["producer"], autocommit=True) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="queue_watchers"):
            app.execute(write)


def test_a_producers_reservation_is_a_kick_row_of_an_hour_at_most_on_the_servers_clock(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
) -> None:
    """Catches queue_kick_reserve taking a producer's pending time or clock as given: a
    reservation of a day (or dated years ahead) held the queue's kicks back as long. A
    producer's is clamped to an hour (PGKICK_KICK_PENDING_MS's maximum) from the server's
    now(); the owner's session (the tests') keeps its clock. A release deletes the 'kick'
    row only, never a worker's announcement. And pgkick's own producer still reserves a kick
    once, then trusts it."""
    reserve = "SELECT * FROM pgkick.queue_kick_reserve(%s, %s, %s)"
    future = "2999-01-01 00:00:00+00"
    with psycopg.connect(login_as["producer"], autocommit=True) as app:
        got = app.execute(reserve, (["a", "b"], timedelta(days=1), None)).fetchall()
        assert sorted(got) == [("a",), ("b",)]
        assert app.execute(reserve, (["c"], timedelta(seconds=5), future)).fetchall() == [("c",)]
    with MaintenanceStore.open(dsn) as store:
        store.execute(
            queries.QUEUE_WATCHER_ANNOUNCE, queue="b", watcher="w1", ttl=timedelta(seconds=30)
        )
    with psycopg.connect(dsn) as owner:
        rows = {(q, w): left for q, w, left in owner.execute(WATCHERS).fetchall()}
        assert timedelta(minutes=59) < rows[("a", "kick")] <= timedelta(hours=1)  # asked a day
        assert timedelta(0) < rows[("c", "kick")] <= timedelta(seconds=5)  # not year 2999
        assert owner.execute(reserve, (["d"], timedelta(seconds=5), future)).fetchall()
        until = "SELECT until FROM pgkick.queue_watchers WHERE queue = 'd'"
        assert owner.execute(until).fetchone()[0].year == 2999
    with psycopg.connect(login_as["producer"], autocommit=True) as app:
        for queue in ("a", "b"):
            app.execute("SELECT pgkick.queue_kick_release(%s)", (queue,))
    with psycopg.connect(dsn) as owner:
        left = [(q, w) for q, w, _ in owner.execute(WATCHERS).fetchall()]
    assert left == [("b", "w1"), ("c", "kick"), ("d", "kick")]
    kicker = RecordingKicker()
    for _ in range(2):
        pgkick.enqueue_and_kick({}, task="t", queue="e", dsn=login_as["producer"], kicker=kicker)
    assert kicker.kicks == [("e", "enqueue")]


OWN_ROLES_GRANTS = """CREATE ROLE {producer} NOLOGIN;
CREATE ROLE {worker} NOLOGIN;
GRANT USAGE ON SCHEMA pgkick TO {producer}, {worker};
GRANT UPDATE (status) ON pgkick.jobs TO {worker};
GRANT SELECT, INSERT, UPDATE, DELETE ON pgkick.queue_watchers TO {producer}, {worker}"""

RIGHTS = """SELECT has_table_privilege(r, 'pgkick.queue_watchers', 'INSERT'),
       has_table_privilege(r, 'pgkick.queue_watchers', 'SELECT'),
       has_function_privilege(r, 'pgkick.queue_kick_reserve(text[], interval, timestamptz)',
                              'EXECUTE'),
       has_function_privilege(r, 'pgkick.queue_kick_release(text)', 'EXECUTE')
FROM (VALUES (%s)) AS v (r)"""


def test_an_install_with_its_own_roles_from_0026_takes_the_producers_table_rights_away(
    empty_dsn: str,
) -> None:
    """Catches migration 0027 leaving an existing install's producer its rights on
    queue_watchers or not granting it the functions that replace them. An install with roles
    of its own (not role_setup's, which every migration re-grants): a role that wrote the
    table to reserve kicks and may not claim loses its rights and gets the functions; one that
    may claim (a worker: it announces there) keeps them and gets the functions too; and the
    functions are nobody else's."""
    suffix = uuid.uuid4().hex[:8]
    roles = {"producer": f"own_producer_{suffix}", "worker": f"own_worker_{suffix}"}
    migrate_only(empty_dsn, range(1, 27))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(OWN_ROLES_GRANTS.format(**roles))
    try:
        assert pgkick.migrate(empty_dsn)[0] == 27  # and any later ones
        with psycopg.connect(empty_dsn) as conn:
            producer = conn.execute(RIGHTS, (roles["producer"],)).fetchone()
            assert producer == (False, False, True, True)
            assert conn.execute(RIGHTS, (roles["worker"],)).fetchone() == (True, True, True, True)
            assert conn.execute(RIGHTS, ("public",)).fetchone() == (False, False, False, False)
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            for role in roles.values():
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


def test_the_watchers_hour_is_the_longest_announcement_or_reservation_there_is() -> None:
    """Catches PGKICK_WATCH_SECONDS or PGKICK_KICK_PENDING_MS allowed past an hour while the
    statements take a watcher more than two hours ahead as none of pgkick's (an hour of margin:
    a reader's now(), its transaction's start, may be earlier than the writer's): a worker's own
    announcement (or a reservation) would then be ignored and cleared."""
    longest = {v.name: v for v in VARIABLES}
    assert longest["PGKICK_WATCH_SECONDS"].high == 3600  # seconds
    assert longest["PGKICK_KICK_PENDING_MS"].high == 3_600_000  # milliseconds
    for name in ("QUEUE_HEAL_PLAN", "QUEUE_WATCHER_ANNOUNCE"):
        assert "interval '2 hours'" in getattr(queries, name), name
    # the reservation's function, as the latest migration that makes it has it (0027)
    reserve = [script for _, _, script in MIGRATIONS if "FUNCTION queue_kick_reserve" in script]
    assert "interval '2 hours'" in reserve[-1] and "interval '1 hour'" in reserve[-1]


TEMP_JOBS = """CREATE TEMP TABLE jobs (id bigint, queue text, task text, payload jsonb,
    run_at timestamptz, max_attempts int, priority int, group_key text, unique_key text,
    traceparent text, tracestate text, status text, last_error text, created_at timestamptz,
    has_dependants boolean, waiting_on int)"""
GRAB = """CREATE FUNCTION pg_temp.grab() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE NOTICE 'ran as %', current_user;
      RETURN NEW;
    END $$"""


@pytest.mark.parametrize(
    ("event", "call"),
    [
        (
            "UPDATE",
            "SELECT * FROM pgkick.job_await(ARRAY[%(child)s]::bigint[],"
            " ARRAY[%(parent)s]::bigint[], ARRAY['run anyway'], NULL)",
        ),
        (
            "INSERT",
            "SELECT * FROM pgkick.job_insert_flow('q', 't', '{}'::jsonb, NULL, '0'::interval, 1,"
            " 0, NULL, 'k', NULL, NULL, NULL, NULL, '1 hour'::interval, NULL)",
        ),
    ],
    ids=["job_await", "job_insert_flow"],
)
def test_no_security_definer_function_reads_a_callers_temporary_table(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811
    event: str,
    call: str,
) -> None:
    """Catches a SECURITY DEFINER function whose search_path leaves pg_temp out (PostgreSQL
    then searches it first): a producer's temporary table `jobs`, with a trigger of its own,
    shadowed pgkick.jobs inside job_await and job_insert_flow, and the trigger ran as the
    functions' owner (the role that migrated: any SQL at its rights)."""
    parent = pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    notices: list[str | None] = []
    with psycopg.connect(login_as["producer"]) as app:
        app.add_notice_handler(lambda diag: notices.append(diag.message_primary))
        child = pgkick.enqueue_in(app, kicker=NoKicker()).enqueue({}, task="noop")
        app.execute(GRAB)
        app.execute(TEMP_JOBS)
        app.execute(
            "INSERT INTO pg_temp.jobs (id, status) VALUES (%s, 'queued'), (%s, 'queued')",
            (child, parent),
        )
        app.execute(
            "CREATE UNIQUE INDEX ON pg_temp.jobs (unique_key)"
            " WHERE unique_key IS NOT NULL AND status IN ('waiting', 'queued', 'running')"
        )
        app.execute(
            f"CREATE TRIGGER grab BEFORE {event} ON pg_temp.jobs"
            " FOR EACH ROW EXECUTE FUNCTION pg_temp.grab()"
        )
        with contextlib.suppress(psycopg.Error):  # the fixed functions may refuse: either way
            app.execute(call % {"child": child, "parent": parent})
        app.rollback()
    assert notices == []


FUNCTION_PATHS = """SELECT p.proname, p.prosecdef, c.setting
FROM pg_proc p
LEFT JOIN LATERAL (SELECT s AS setting FROM unnest(p.proconfig) AS s
                   WHERE s LIKE 'search\\_path=%%') AS c ON true
WHERE p.pronamespace = 'pgkick'::regnamespace ORDER BY 1"""


def test_an_install_from_0024_has_every_function_search_pg_temp_last(empty_dsn: str) -> None:
    """Catches migration 0025 missing on an upgrade: an install migrated before it keeps its
    functions' path without pg_temp (searched first then), and every function of the schema,
    SECURITY DEFINER or not, must name it last after the upgrade as after a fresh install."""
    migrate_only(empty_dsn, range(1, 25), path="pgkick")  # as migrations ran before 0025
    with psycopg.connect(empty_dsn) as conn:
        before = conn.execute(FUNCTION_PATHS).fetchall()
    assert ("job_await", True, "search_path=pgkick") in before
    assert pgkick.migrate(empty_dsn)[0] == 25  # and any later ones
    with psycopg.connect(empty_dsn) as conn:
        after = conn.execute(FUNCTION_PATHS).fetchall()
    assert {row[0] for row in after} >= {row[0] for row in before}  # later ones add some
    # job_ordered_at_set (0011) has no path: a trigger run with its caller's rights that
    # names no table (a SET clause would cost every grouped insert a save and restore)
    assert {row[2].replace('"', "") for row in after if row[0] != "job_ordered_at_set"} == {
        "search_path=pgkick, pg_temp"
    }
    # job_await, job_insert_flow, the two triggers', queue_kick_reserve and _release (0027)
    assert sum(row[1] for row in after) == 6


AWAIT_RIGHT = (
    "SELECT has_function_privilege(%s,"
    " 'pgkick.job_await(bigint[], bigint[], text[], timestamptz)', 'EXECUTE')"
)


def test_job_await_is_not_publics_to_call_where_roles_were_never_set_up(empty_dsn: str) -> None:
    """Catches job_await (SECURITY DEFINER) left executable by PUBLIC on an install where
    `pgkick migrate --roles` never ran (only role_setup revoked it): any role that may use the
    schema could flag and lock any job as a parent with the owner's rights. Migration 0028
    takes PUBLIC's right away and keeps it for a role that may insert jobs. The migrations
    are applied here one by one, without the role set-up a `pgkick migrate` re-runs."""
    suffix = uuid.uuid4().hex[:8]
    inserter, reader = f"own_inserter_{suffix}", f"own_reader_{suffix}"
    migrate_only(empty_dsn, range(1, 28))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {inserter} NOLOGIN")
        conn.execute(f"CREATE ROLE {reader} NOLOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA pgkick TO {inserter}, {reader}")
        conn.execute(f"GRANT INSERT (queue, task, payload) ON pgkick.jobs TO {inserter}")
        conn.execute(f"GRANT SELECT (id) ON pgkick.jobs TO {reader}")
        assert conn.execute(AWAIT_RIGHT, (reader,)).fetchone() == (True,)  # by PUBLIC's
    try:
        migrate_only(empty_dsn, [28])
        with psycopg.connect(empty_dsn) as conn:
            rights = [conn.execute(AWAIT_RIGHT, (r,)).fetchone() for r in (reader, inserter)]
            assert rights == [(False,), (True,)]
            assert conn.execute(AWAIT_RIGHT, ("public",)).fetchone() == (False,)
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            for role in (inserter, reader):
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")
