"""pgkick.aio under a running event loop: concurrent tasks, kicks that never block the loop,
the after-commit rule and the synchronous API's errors, on psycopg's AsyncConnection."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import psycopg
import pytest

import pgkick
from pgkick import aio
from pgkick.connections import aio_pool
from pgkick.connections.linger import APPLICATION_NAME
from pgkick.connections.pool import DEFAULT_SIZE
from pgkick.errors import MisuseError, UnknownParent
from pgkick.kick.kickers import NoKicker
from tests.helpers import sessions_gone, sessions_of, wait_for_lock_waiters
from tests.test_producer import RecordingKicker, count_jobs


class SeeingKicker(RecordingKicker):
    """Records, for each kick, how many jobs another session could see at that moment."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self.visible: list[int] = []

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.visible.append(count_jobs(self.dsn))
        super().kick(queue, reason)


class LoopWatchingKicker(RecordingKicker):
    """A kick that only finishes once the loop has ticked three times meanwhile: if the kick
    blocked the loop, the ticker could not tick and the kick would time out."""

    def __init__(self) -> None:
        super().__init__()
        self.in_kick = threading.Event()
        self.ticked = threading.Event()
        self.loop_kept_running = False

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.in_kick.set()
        self.loop_kept_running = self.ticked.wait(10)
        super().kick(queue, reason)


def test_many_concurrent_tasks_enqueue_once_each_on_a_few_sessions_and_kick_once(
    dsn: str,
) -> None:
    """Catches: a session per task (no pool), lost or doubled jobs under asyncio.gather, and a
    kick per job instead of one reserved kick for the queue."""
    kicker = RecordingKicker()

    async def main() -> tuple[list[int], int]:
        ids = await asyncio.gather(
            *(aio.enqueue_and_kick({"n": n}, task="t", dsn=dsn, kicker=kicker) for n in range(60))
        )
        sessions = await asyncio.to_thread(sessions_of, dsn, APPLICATION_NAME)
        await aio_pool.close_all()
        return list(ids), sessions

    ids, sessions = asyncio.run(main())
    with psycopg.connect(dsn) as conn:
        found = dict(conn.execute("SELECT id, (payload->>'n')::int FROM pgkick.jobs").fetchall())
    assert [found[i] for i in ids] == list(range(60))  # each task got its own job, once
    assert 1 <= sessions <= DEFAULT_SIZE
    assert kicker.kicks == [("default", "enqueue")]
    assert sessions_of(dsn, APPLICATION_NAME) == 0


def test_a_slow_kick_does_not_block_the_event_loop(dsn: str) -> None:
    """Catches: the blocking kicker called on the loop's thread (the ticker then never ticks
    while the kick waits for it, and the kick times out)."""
    kicker = LoopWatchingKicker()

    async def ticker() -> None:
        while not kicker.in_kick.is_set():
            await asyncio.sleep(0)
        for _ in range(3):
            await asyncio.sleep(0)
        kicker.ticked.set()

    async def main() -> None:
        tick = asyncio.create_task(ticker())
        await aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=kicker)
        await tick
        await aio_pool.close_all()

    asyncio.run(asyncio.wait_for(main(), 30))
    assert kicker.loop_kept_running and kicker.kicks == [("default", "enqueue")]


def test_transaction_kicks_after_commit_and_nothing_after_rollback(dsn: str) -> None:
    """Catches: a kick sent before the commit (the kicker would see no job), a kick or a job
    left after a rollback, and kicks per job instead of per queue."""
    kicker = SeeingKicker(dsn)

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                await jobs.enqueue({"n": 1}, task="t", queue="q")
                await jobs.enqueue({"n": 2}, task="t", queue="q")
            assert kicker.kicks == [("q", "enqueue")] and kicker.visible == [2]
            with pytest.raises(ZeroDivisionError):
                async with aio.transaction(conn, kicker=kicker) as jobs:
                    await jobs.enqueue({"n": 3}, task="t", queue="r")
                    _ = 1 / 0
            await conn.execute("SELECT 1")  # a transaction in progress now: refused
            with pytest.raises(RuntimeError, match="must own the transaction"):
                async with aio.transaction(conn, kicker=kicker):
                    pass

    asyncio.run(main())
    assert kicker.kicks == [("q", "enqueue")] and count_jobs(dsn) == 2


def test_enqueue_many_is_one_commit_and_a_bad_job_writes_nothing(dsn: str) -> None:
    """Catches: jobs written before a later bad one is found, and an error that does not name
    the bad job as the synchronous API does."""
    kicker = RecordingKicker()

    async def main() -> list[int]:
        with pytest.raises(TypeError, match=r"jobs\[1\]: needs payload and task"):
            await aio.enqueue_many(
                [{"payload": {}, "task": "t"}, {"task": "t"}], dsn=dsn, kicker=kicker
            )
        jobs = [{"payload": {"n": n}, "task": "t", "queue": f"q{n % 2}"} for n in range(10)]
        ids = await aio.enqueue_many(jobs, dsn=dsn, kicker=kicker)
        await aio_pool.close_all()
        return ids

    ids = asyncio.run(main())
    with psycopg.connect(dsn) as conn:
        xids = conn.execute("SELECT DISTINCT xmin::text FROM pgkick.jobs").fetchall()
    assert len(ids) == 10 and count_jobs(dsn) == 10 and len(xids) == 1
    assert sorted(kicker.kicks) == [("q0", "enqueue"), ("q1", "enqueue")]


@pytest.mark.parametrize(
    ("payload", "kwargs", "error", "match"),
    [
        (float("nan"), {}, ValueError, "payload"),
        ({}, {"task": ""}, ValueError, "task: must not be empty"),
        ({}, {"max_attempts": 0}, ValueError, "max_attempts"),
        ({1: "x"}, {}, TypeError, "payload"),
    ],
)
def test_bad_input_fails_before_anything_is_written_in_every_async_form(
    dsn: str, payload: Any, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    """Catches: an async form skipping the synchronous API's validation."""
    args = {"task": "t", **kwargs}

    async def main() -> None:
        with pytest.raises(error, match=match):
            await aio.enqueue_and_kick(payload, dsn=dsn, kicker=NoKicker(), **args)
        with pytest.raises(error, match=match):
            await aio.enqueue_many([{"payload": payload, **args}], dsn=dsn, kicker=NoKicker())
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            with pytest.raises(error, match=match):
                async with aio.transaction(conn, kicker=NoKicker()) as jobs:
                    await jobs.enqueue(payload, **args)
        await aio_pool.close_all()

    asyncio.run(main())
    assert count_jobs(dsn) == 0


def test_a_batch_refused_half_way_in_the_apps_transaction_leaves_none_of_its_jobs(
    dsn: str,
) -> None:
    """Catches AsyncEnqueuer.enqueue_many sending its inserts straight into the app's
    transaction: a batch whose second job names no existing parent raised UnknownParent,
    and an app that handled it and committed kept the first job (and the second, linked to
    nothing), unkicked. The sync form's savepoint leaves nothing; so must this one."""
    batch = [
        {"payload": {"n": 1}, "task": "t", "queue": "m"},
        {"payload": {"n": 2}, "task": "t", "queue": "m", "after": [987654321]},
    ]
    kicker = RecordingKicker()

    async def run() -> None:
        conn = await psycopg.AsyncConnection.connect(dsn)
        try:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                with pytest.raises(UnknownParent):
                    await jobs.enqueue_many(batch)
                await jobs.enqueue({"n": 3}, task="t", queue="kept")
        finally:
            await conn.close()

    asyncio.run(run())
    assert count_jobs(dsn) == 1 and kicker.kicks == [("kept", "enqueue")]


@pytest.mark.parametrize("form", ["enqueue_and_kick", "transaction"])
def test_a_caller_cancelled_after_its_commit_still_kicks_what_it_committed(
    dsn: str, form: str
) -> None:
    """The reservation after the commit is held up (queue_watchers locked by another
    session) and the caller is cancelled meanwhile (a request timeout, a client gone).
    Catches the cancellation taking the kick with it: the job stayed committed and
    unkicked, to wait for a sweep or the daily reaper (a review, 2026-12-05). The caller
    still gets its cancellation, once the job is kicked."""
    kicker = RecordingKicker()

    async def enqueue() -> None:
        if form == "enqueue_and_kick":
            await aio.enqueue_and_kick({}, task="t", queue="cq", dsn=dsn, kicker=kicker)
            return
        conn = await psycopg.AsyncConnection.connect(dsn)
        try:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                await jobs.enqueue({}, task="t", queue="cq")
        finally:
            await conn.close()

    async def run() -> None:
        caller = asyncio.create_task(enqueue())
        await asyncio.to_thread(wait_for_lock_waiters, dsn)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller

    with psycopg.connect(dsn) as holder:
        holder.execute("LOCK TABLE pgkick.queue_watchers IN EXCLUSIVE MODE")
        asyncio.run(run())
    assert count_jobs(dsn) == 1 and kicker.kicks == [("cq", "enqueue")]


@pytest.mark.parametrize("form", ["enqueue_and_kick", "after", "enqueue_many", "transaction"])
def test_a_caller_cancelled_during_its_commit_still_commits_and_kicks(dsn: str, form: str) -> None:
    """The COMMIT (a lone job's INSERT's, or its transaction's) is held up by another
    session's lock, and the caller is cancelled meanwhile. Catches the cancellation
    reaching psycopg in the round trip that commits: the server had most often committed
    already, and the job stayed unkicked (a review: 59 of 222 transactions cancelled at
    random); here, psycopg cancelled the statement. The round trip ends, its job is
    kicked, then the caller gets its cancel."""
    kicker = RecordingKicker()
    with psycopg.connect(dsn, autocommit=True) as setup:
        parent = setup.execute(
            "INSERT INTO pgkick.jobs (queue, task, payload, status, finished_at)"
            " VALUES ('p', 't', '{}', 'done', now()) RETURNING id"
        ).fetchone()[0]  # type: ignore[index]
        setup.execute(  # every COMMIT of a job waits for advisory lock 42: a deferred trigger
            "CREATE FUNCTION wait_for_42() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_advisory_xact_lock(42); RETURN NULL; END $$"
        )
        setup.execute(
            "CREATE CONSTRAINT TRIGGER gate AFTER INSERT ON pgkick.jobs DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW EXECUTE FUNCTION wait_for_42()"
        )

    async def enqueue() -> None:
        if form == "enqueue_and_kick":
            await aio.enqueue_and_kick({}, task="t", queue="cq", dsn=dsn, kicker=kicker)
        elif form == "after":
            await aio.enqueue_and_kick({}, task="t", queue="cq", after=[parent], dsn=dsn,
                                       kicker=kicker)  # fmt: skip
        elif form == "enqueue_many":
            await aio.enqueue_many([{"payload": {}, "task": "t", "queue": "cq"}], dsn=dsn,
                                   kicker=kicker)  # fmt: skip
        else:
            conn = await psycopg.AsyncConnection.connect(dsn)
            try:
                async with aio.transaction(conn, kicker=kicker) as jobs:
                    await jobs.enqueue({}, task="t", queue="cq")
            finally:
                await conn.close()

    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(42)")

        async def run() -> None:
            caller = asyncio.create_task(enqueue())
            await asyncio.to_thread(wait_for_lock_waiters, dsn)
            caller.cancel()
            for _ in range(3):  # the cancellation reaches the caller while it waits
                await asyncio.sleep(0)
            await asyncio.to_thread(holder.execute, "SELECT pg_advisory_unlock(42)")
            with pytest.raises(asyncio.CancelledError):
                await caller

        asyncio.run(run())
    assert count_jobs(dsn) == 2 and kicker.kicks == [("cq", "enqueue")]


def test_a_kick_waiting_for_a_free_thread_runs_though_the_caller_is_cancelled(dsn: str) -> None:
    """The loop's executor is busy (one thread, held) when the kick is handed to it, so the
    kick waits in its queue, and the caller is cancelled meanwhile. Catches the cancel
    taking the kick off the queue: the job was committed and never kicked (a review: 4 of
    229 cancelled transactions)."""
    kicker = RecordingKicker()
    busy = threading.Event()
    one_thread = ThreadPoolExecutor(max_workers=1)

    async def run() -> None:
        caller = asyncio.create_task(
            aio.enqueue_and_kick({}, task="t", queue="cq", dsn=dsn, kicker=kicker)
        )
        await asyncio.to_thread(wait_for_lock_waiters, dsn)  # committed; its reservation waits
        loop = asyncio.get_running_loop()
        loop.set_default_executor(one_thread)
        held = loop.run_in_executor(None, busy.wait)
        holder.commit()  # the reservation goes on, and the kick is handed to the executor
        for _ in range(10_000):  # until the kick waits in the executor's queue
            if one_thread._work_queue.qsize():
                break
            await asyncio.sleep(0.001)
        assert one_thread._work_queue.qsize() == 1, "the kick never reached the executor"
        caller.cancel()
        try:
            with pytest.raises(asyncio.CancelledError):
                await caller
        finally:
            busy.set()
        await held
        await loop.run_in_executor(None, lambda: None)  # one thread, in order: after the kick

    with psycopg.connect(dsn) as holder:
        holder.execute("LOCK TABLE pgkick.queue_watchers IN EXCLUSIVE MODE")
        asyncio.run(run())
    assert count_jobs(dsn) == 1 and kicker.kicks == [("cq", "enqueue")]


def test_a_connection_the_server_closed_while_idle_is_not_lent_again(dsn: str) -> None:
    """Catches the loop's pool lending a lingering connection the server had terminated (an
    idle timeout, a restart, a compute suspended): the next enqueue failed with
    AdminShutdown, where the threads' pool drops such a connection before lending it."""

    async def run() -> list[int]:
        first = await aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = %s"
                " AND state = 'idle' AND pid <> pg_backend_pid()",
                (APPLICATION_NAME,),
            )
        second = await aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())
        return [first, second]

    assert len(set(asyncio.run(run()))) == 2 and count_jobs(dsn) == 2


def test_the_loops_connections_close_after_linger(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches: an asyncio producer session that stays open without work."""
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "100")

    async def main() -> tuple[int, int]:
        await aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())
        during = await asyncio.to_thread(sessions_of, dsn, APPLICATION_NAME)
        for _ in range(2000):  # the loop's timer closes it; nothing here closes it
            if await asyncio.to_thread(sessions_of, dsn, APPLICATION_NAME) == 0:
                break
            await asyncio.sleep(0.01)
        return during, await asyncio.to_thread(sessions_of, dsn, APPLICATION_NAME)

    assert asyncio.run(main()) == (1, 0)


def test_a_delayed_job_books_a_wake_up_and_sends_no_kick(dsn: str) -> None:
    """Catches: a job due later kicked now (a worker would find nothing ready)."""
    kicker = RecordingKicker()

    async def main() -> None:
        await aio.enqueue_and_kick({}, task="t", delay=60, dsn=dsn, kicker=kicker)
        await aio_pool.close_all()

    asyncio.run(main())
    assert kicker.kicks == [] and [q for q, _ in kicker.wakes] == ["default"]
    assert all(isinstance(when, datetime) for _, when in kicker.wakes)


def test_priorities_and_groups_reach_the_table(dsn: str) -> None:
    """Catches the async forms dropping a job's priority or group (the claim would order
    it wrongly). Their unique keys: tests/test_unique.py."""

    async def go() -> list[tuple[int, str | None]]:
        kicker = NoKicker()
        await aio.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=kicker, priority=7, group="g")
        await aio.enqueue_many(
            [{"payload": {}, "task": "noop", "priority": -3, "group": "h"}], dsn=dsn, kicker=kicker
        )
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cursor = await conn.execute("SELECT priority, group_key FROM pgkick.jobs ORDER BY id")
            return [tuple(row) for row in await cursor.fetchall()]

    assert asyncio.run(go()) == [(7, "g"), (-3, "h")]


def test_the_async_forms_write_to_the_configured_schema(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches the async forms sending pgkick's statements unrewritten (to schema pgkick)
    when PGKICK_SCHEMA names another, as the synchronous forms never do."""
    from pgkick.store import migrations as schema
    from tests.store import JobStore

    with JobStore.open(dsn, schema="app_queue") as store:
        schema.migrate(store)
    monkeypatch.setenv("PGKICK_SCHEMA", "app_queue")

    async def go() -> int:
        job = await aio.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
        await aio_pool.close_all()
        return job

    job = asyncio.run(go())
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT id FROM app_queue.jobs").fetchall() == [(job,)]
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


def test_a_caller_cancelled_as_a_connection_is_handed_to_it_passes_it_on(dsn: str) -> None:
    """Every connection of the loop's pool is lent and two calls wait; one is given back
    (its wake-up goes to the first caller) and that caller is cancelled in the same instant
    (a request timeout). Catches the wake-up dying with it (asyncio.Condition before Python
    3.13, CPython gh-112202): the second caller waited, a connection idle, until some other
    call gave one back, in a quiet app for ever."""
    from contextlib import AsyncExitStack

    from pgkick import config

    async def run() -> int:
        pool = aio_pool.shared(dsn, config.app_settings().producer_linger)
        holders = [AsyncExitStack() for _ in range(DEFAULT_SIZE)]
        for holder in holders:
            await holder.enter_async_context(pool.connection())
        first, second = (
            asyncio.create_task(aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker()))
            for _ in range(2)
        )
        while len(pool._cond._waiters) < 2:  # both wait for a connection
            await asyncio.sleep(0)
        await holders[0].aclose()  # one given back: its wake-up goes to the first caller
        first.cancel()  # cancelled before it resumed
        with pytest.raises(asyncio.CancelledError):
            await first
        job = await asyncio.wait_for(second, 30)  # a guard against a hang, not a timing
        for holder in holders[1:]:
            await holder.aclose()
        await aio_pool.close_all()
        return job

    assert asyncio.run(run()) > 0 and count_jobs(dsn) == 1


def test_a_transaction_cancelled_twice_during_its_reservation_is_still_cancelled(
    dsn: str,
) -> None:
    """The reservation after the app's commit is held up, and the caller cancelled twice
    (a request timeout, then a shutdown cancelling every task) while psycopg cancels the
    statement: psycopg then closes the app's connection. Catches the autocommit given back
    to that closed connection raising a DatabaseError, which replaced the CancelledError
    and was taken for a failed reservation: the caller returned normally, cancelled."""
    kicker = RecordingKicker()

    async def enqueue() -> None:
        conn = await psycopg.AsyncConnection.connect(dsn)
        try:
            async with aio.transaction(conn, kicker=kicker) as jobs:
                await jobs.enqueue({}, task="t", queue="cq")
        finally:
            await conn.close()

    async def run() -> None:
        caller = asyncio.create_task(enqueue())
        await asyncio.to_thread(wait_for_lock_waiters, dsn)
        caller.cancel()
        await asyncio.sleep(0)  # the caller's turn: psycopg now cancels the statement
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller

    with psycopg.connect(dsn) as holder:
        holder.execute("LOCK TABLE pgkick.queue_watchers IN EXCLUSIVE MODE")
        asyncio.run(run())
    assert count_jobs(dsn) == 1 and kicker.kicks == [("cq", "enqueue")]


@pytest.mark.parametrize("option", [{"priority": 9}, {"delay": 3600}, {"queue": "x"}])
@pytest.mark.parametrize("form", ["enqueue_many", "workflow"])
def test_a_job_option_beside_where_to_commit_is_refused_not_dropped(
    dsn: str, form: str, option: dict[str, Any]
) -> None:
    """`aio.enqueue_many(jobs, ...)` and `Workflow.enqueue_async(...)` take where to commit
    (dsn, kicker, clock); a job's option goes in its mapping (or the node's add). Catches
    one given beside them dropped without a word: the jobs were written without it (a
    delay of an hour gone, the jobs run at once)."""
    import pgkick
    from pgkick.errors import InvalidArgumentType

    async def enqueue() -> object:
        if form == "enqueue_many":
            jobs = [{"payload": {}, "task": "t"}]
            return await aio.enqueue_many(jobs, dsn=dsn, kicker=NoKicker(), **option)
        workflow = pgkick.Workflow()
        workflow.add("t", {})
        return await workflow.enqueue_async(dsn=dsn, kicker=NoKicker(), **option)

    async def run() -> None:
        with pytest.raises(InvalidArgumentType, match=f"takes no {next(iter(option))}="):
            await enqueue()
        await aio_pool.close_all()

    asyncio.run(run())
    assert count_jobs(dsn) == 0


def test_a_loop_that_ends_closes_its_connections(dsn: str) -> None:
    """An app that runs a loop per request (asyncio.run in a Lambda handler or a Celery
    task; asgiref's async_to_sync) ends it before the linger timer fires. Catches the timer
    dying with the loop: each loop's producer sessions stayed open for the life of the
    process (the pool, kept in aio_pool's table, holding them)."""
    for n in range(3):
        asyncio.run(aio.enqueue_and_kick({"n": n}, task="t", dsn=dsn, kicker=NoKicker()))
    assert sessions_gone(dsn, APPLICATION_NAME) and count_jobs(dsn) == 3


def test_a_closed_connection_is_refused_as_closed(dsn: str) -> None:
    """Catches aio.transaction(a closed AsyncConnection) saying it must own the transaction
    (autocommit off, commit or roll back first): neither was the problem, and doing what
    it said could not help."""
    from pgkick.errors import MisuseError

    async def run() -> None:
        conn = await psycopg.AsyncConnection.connect(dsn)
        await conn.close()
        with pytest.raises(MisuseError, match="is closed"):
            async with aio.transaction(conn, kicker=NoKicker()):
                pass

    asyncio.run(run())
    with psycopg.connect(dsn) as conn:  # and the sync form, by the same check
        pass
    with pytest.raises(MisuseError, match=r"pgkick\.transaction\(\): the connection is closed"):
        with pgkick.transaction(conn, kicker=NoKicker()):
            pass


def test_enqueue_in_joins_the_apps_open_transaction_and_kicks_only_what_committed(
    dsn: str,
) -> None:
    """Catches: no asyncio form of `pgkick.enqueue_in` (an app's AsyncConnection already in a
    transaction could only use the sync form, blocking its loop), a kick before the commit,
    a rolled-back job kicked, and a job with `after=` on an idle connection committed by a
    savepoint of its own (psycopg's BEGIN ... COMMIT) instead of joining the app's rollback."""
    kicker = RecordingKicker()

    async def main() -> tuple[list[int], list[int], list[int]]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as auto:
            with pytest.raises(MisuseError, match="autocommit with no transaction open"):
                await aio.enqueue_in(auto, kicker=kicker).enqueue({}, task="t")
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            pending = aio.enqueue_in(conn, kicker=kicker)
            await conn.execute("SELECT 1")  # the app's transaction is open
            first = await pending.enqueue({"n": 1}, task="t")
            more = await pending.enqueue_many([{"payload": {"n": 2}, "task": "t"}])
            with pytest.raises(MisuseError, match="still open"):
                await pending.kick()
            assert kicker.kicks == [] and count_jobs(dsn) == 0  # nothing seen before the commit
            await conn.commit()
            kicked = await pending.kick()
            assert await pending.kick() == []  # a second kick sends nothing
            # idle, autocommit off: the child joins the app's transaction, and its rollback
            child = await pending.enqueue({"n": 3}, task="t", after=[first])
            async with pending.savepoint():
                await pending.enqueue({"n": 4}, task="t")
            await conn.rollback()
            gone = await pending.kick()  # kept (not seen committed), then discarded
            pending.discard()
            assert pending.ids == [] and child not in gone
        await aio_pool.close_all()
        return [first, *more], kicked, gone

    ids, kicked, gone = asyncio.run(main())
    assert kicked == sorted(ids) and gone == []
    assert kicker.kicks == [("default", "enqueue")]
    assert count_jobs(dsn) == 2
    wrong = r"pgkick\.aio\.enqueue_in: needs .* use pgkick\.enqueue_in"
    with pytest.raises(TypeError, match=wrong):
        with psycopg.connect(dsn) as sync:
            aio.enqueue_in(sync)  # type: ignore[arg-type]
