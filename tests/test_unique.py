"""Unique jobs: a live job's key is never enqueued twice, by any form, by racing producers."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import psycopg
import pytest

from pgkick import aio
from pgkick.cli.main import main
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.validation import job_spec
from tests.helpers import wait_for_lock_waiters
from tests.store import JobStore
from tests.test_producer import RecordingKicker

LEASE = timedelta(minutes=5)


def rows_with_key(dsn: str, key: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT id, status FROM pgkick.jobs WHERE unique_key = %s ORDER BY id", (key,)
        ).fetchall()


def test_enqueue_and_kick_returns_the_live_job_and_frees_the_key_once_it_is_done(
    dsn: str, store: JobStore
) -> None:
    """Catches a second job (or a second kick) for a key while its job is queued or
    running, and a key that stays taken after its job finished."""
    kicker = RecordingKicker()
    first = producer.enqueue_and_kick({"n": 1}, task="t", unique_key="k", dsn=dsn, kicker=kicker)
    again = producer.enqueue_and_kick({"n": 2}, task="t", unique_key="k", dsn=dsn, kicker=kicker)
    assert again == first
    assert kicker.kicks == [("default", "enqueue")]  # the duplicate kicked nothing
    jobs = store.claim("default", batch=10, lease=LEASE)
    assert [job.payload for job in jobs] == [{"n": 1}]
    running = producer.enqueue_and_kick({"n": 3}, task="t", unique_key="k", dsn=dsn, kicker=kicker)
    assert running == first
    store.complete_many(jobs)
    later = producer.enqueue_and_kick({"n": 4}, task="t", unique_key="k", dsn=dsn, kicker=kicker)
    assert later != first
    assert rows_with_key(dsn, "k") == [(first, "done"), (later, "queued")]


def test_transaction_enqueue_with_a_key_returns_the_live_job(dsn: str) -> None:
    """Catches pgkick.transaction() ignoring unique_key (it would insert a second job)."""
    first = producer.enqueue_and_kick(
        {}, task="t", unique_key="order-42", dsn=dsn, kicker=NoKicker()
    )
    with psycopg.connect(dsn) as conn, producer.transaction(conn, kicker=NoKicker()) as jobs:
        assert jobs.enqueue({}, task="t", unique_key="order-42") == first
        assert jobs.queued == []  # nothing to kick
    assert rows_with_key(dsn, "order-42") == [(first, "queued")]


def test_enqueue_many_skips_duplicates_in_the_batch_and_live_ones_never_failing(
    dsn: str,
) -> None:
    """pgqueuer #678: a duplicate must not fail the batch. Catches a batch that raises on a
    live key or on a key repeated inside it, and ids returned out of input order."""
    live = producer.enqueue_and_kick({}, task="t", unique_key="a", dsn=dsn, kicker=NoKicker())
    kicker = RecordingKicker()
    ids = producer.enqueue_many(
        [
            {"payload": {"i": 0}, "task": "t", "unique_key": "a"},  # live already
            {"payload": {"i": 1}, "task": "t"},
            {"payload": {"i": 2}, "task": "t", "unique_key": "b"},
            {"payload": {"i": 3}, "task": "t", "unique_key": "b"},  # repeats b
            {"payload": {"i": 4}, "task": "t"},
        ],
        dsn=dsn,
        kicker=kicker,
    )
    assert ids[0] == live and ids[3] == ids[2]
    assert len(set(ids)) == 4
    with psycopg.connect(dsn) as conn:
        payloads = conn.execute("SELECT id, payload FROM pgkick.jobs ORDER BY id").fetchall()
    assert dict(payloads) == {live: {}, ids[1]: {"i": 1}, ids[2]: {"i": 2}, ids[4]: {"i": 4}}
    assert kicker.kicks == [("default", "enqueue")]


def test_racing_producers_with_one_key_create_exactly_one_job(dsn: str) -> None:
    """Eight connections insert one key while the first insert is uncommitted: each waits
    on the index, then must answer the first job's id. Catches an insert that does not
    skip a key held by an uncommitted job (a unique violation, or eight jobs) and a
    read-back inside the insert's statement, whose snapshot predates the holder's commit."""
    spec = job_spec({}, task="t", unique_key="race")
    with psycopg.connect(dsn) as first:
        held, inserted = JobStore(first).insert_unique(spec)  # open transaction: not committed
        assert inserted
        answers: list[tuple[int, bool]] = []
        barrier = threading.Barrier(8)

        def produce() -> None:
            with JobStore.open(dsn) as mine:
                barrier.wait()
                job, new = mine.insert_unique(spec)
                answers.append((job.id, new))

        threads = [threading.Thread(target=produce) for _ in range(8)]
        for thread in threads:
            thread.start()
        wait_for_lock_waiters(dsn, count=8)
        first.commit()
        for thread in threads:
            thread.join(10)
    assert answers == [(held.id, False)] * 8
    assert rows_with_key(dsn, "race") == [(held.id, "queued")]


def test_racing_batches_with_overlapping_keys_make_one_job_per_key(dsn: str) -> None:
    """Two enqueue_many batches share keys x and y; the first is uncommitted while the second
    runs. Catches a batch that fails or duplicates on keys another batch just committed."""
    result: list[list[int]] = []
    with psycopg.connect(dsn) as first, producer.transaction(first, kicker=NoKicker()) as mine:
        ids_a = mine.enqueue_many(
            [{"payload": {}, "task": "t", "unique_key": k} for k in ("x", "y")]
        )

        def second() -> None:
            result.append(
                producer.enqueue_many(
                    [{"payload": {}, "task": "t", "unique_key": k} for k in ("w", "x", "y", "z")],
                    dsn=dsn,
                    kicker=NoKicker(),
                )
            )

        thread = threading.Thread(target=second)
        thread.start()
        wait_for_lock_waiters(dsn, count=1)
    thread.join(10)  # the first batch committed as its transaction() block ended
    ids_b = result[0]
    assert ids_b[1:3] == ids_a
    with psycopg.connect(dsn) as conn:
        keys = conn.execute("SELECT unique_key FROM pgkick.jobs ORDER BY unique_key").fetchall()
    assert keys == [("w",), ("x",), ("y",), ("z",)]


def test_the_async_forms_answer_the_live_job_write_nothing_and_skip_duplicates(
    dsn: str,
) -> None:
    """pgkick.aio's three forms, as the synchronous ones. Catches unique_key refused or
    ignored by an async form (a second job), a duplicate kicked again, a batch failing
    or duplicating on a live key or on a key repeated inside it, and ids out of order."""
    kicker, batch_kicker = RecordingKicker(), RecordingKicker()

    async def go() -> tuple[int, int, int, list[int], list[object]]:
        first = await aio.enqueue_and_kick({}, task="t", unique_key="a", dsn=dsn, kicker=NoKicker())
        again = await aio.enqueue_and_kick({}, task="t", unique_key="a", dsn=dsn, kicker=kicker)
        async with (
            await psycopg.AsyncConnection.connect(dsn) as conn,
            aio.transaction(conn, kicker=kicker) as jobs,
        ):
            inside = await jobs.enqueue({}, task="t", unique_key="a")
            queued = list(jobs.queued)
        ids = await aio.enqueue_many(
            [
                {"payload": {"i": 0}, "task": "t", "unique_key": "a"},  # live already
                {"payload": {"i": 1}, "task": "t"},
                {"payload": {"i": 2}, "task": "t", "unique_key": "b"},
                {"payload": {"i": 3}, "task": "t", "unique_key": "b"},  # repeats b
                {"payload": {"i": 4}, "task": "t"},
            ],
            dsn=dsn,
            kicker=batch_kicker,
        )
        return first, again, inside, ids, queued

    first, again, inside, ids, queued = asyncio.run(go())
    assert again == first == inside == ids[0] and queued == []
    assert ids[3] == ids[2] and len(set(ids)) == 4
    with psycopg.connect(dsn) as conn:
        payloads = conn.execute("SELECT id, payload FROM pgkick.jobs ORDER BY id").fetchall()
    assert dict(payloads) == {first: {}, ids[1]: {"i": 1}, ids[2]: {"i": 2}, ids[4]: {"i": 4}}
    assert kicker.kicks == []  # the duplicates kicked nothing (no kick was pending either)
    assert batch_kicker.kicks == [("default", "enqueue")]


def test_racing_async_producers_with_one_key_create_exactly_one_job(dsn: str) -> None:
    """Real AsyncConnections: one holds key "race" in an uncommitted pgkick.aio.transaction;
    an enqueue_and_kick and an enqueue_many with the key are seen waiting on the index
    (pg_stat_activity), then the holder commits. Catches an async insert that does not
    skip a key held by an uncommitted job (a unique violation, or three jobs) and a
    read-back inside the insert's statement (its snapshot predates the holder's commit)."""

    async def go() -> tuple[int, int, list[int]]:
        async with await psycopg.AsyncConnection.connect(dsn) as holder:
            async with aio.transaction(holder, kicker=NoKicker()) as jobs:
                held = await jobs.enqueue({}, task="t", unique_key="race")
                one = asyncio.create_task(
                    aio.enqueue_and_kick(
                        {}, task="t", unique_key="race", dsn=dsn, kicker=NoKicker()
                    )
                )
                many = asyncio.create_task(
                    aio.enqueue_many(
                        [{"payload": {}, "task": "t", "unique_key": k} for k in ("race", "new")],
                        dsn=dsn,
                        kicker=NoKicker(),
                    )
                )
                await asyncio.to_thread(wait_for_lock_waiters, dsn, count=2)
            return held, await one, await many  # the holder committed as its block ended

    held, one, many = asyncio.run(go())
    assert one == held and many[0] == held and many[1] != held
    assert rows_with_key(dsn, "race") == [(held, "queued")]
    assert len(rows_with_key(dsn, "new")) == 1


def test_retry_of_a_failed_job_whose_key_a_live_job_holds_is_refused_naming_both(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pgkick retry` of a failed job whose key is taken again (a live job, or another
    failed job of the same retry). Catches: the unique index's raw error (exit 2, no job
    named) instead of a usage error naming the key and the job in the way, a retry that
    writes some jobs before refusing, and a refusal of a retry that has no conflict."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)

    def failed(key: str) -> int:
        with JobStore.open(dsn) as store:
            store.insert_unique(job_spec({}, task="t", queue="f", unique_key=key))
            (job,) = store.claim("f", batch=1, lease=LEASE)
            store.fail(job.id, job.attempts, "boom", permanent=True)
            return job.id

    def retry(*argv: str) -> tuple[int, str]:
        code = main(["retry", *argv, "--dsn", dsn])
        return code, capsys.readouterr().err

    held_once = failed("k")
    live = producer.enqueue_and_kick({}, task="t", unique_key="k", dsn=dsn, kicker=NoKicker())
    plain = failed("other")
    for argv in ([str(held_once)], ["--all"]):
        code, err = retry(*argv)
        assert code == 1, err
        assert f"job {held_once}'s unique key 'k' is held by queued job {live}" in err
    assert rows_with_key(dsn, "k") == [(held_once, "failed"), (live, "queued")]
    assert rows_with_key(dsn, "other") == [(plain, "failed")]  # --all wrote nothing

    twin = failed("twin")
    again = failed("twin")
    code, err = retry("--all")
    assert code == 1 and f"jobs {twin} and {again} share unique key 'twin'" in err
    assert retry(str(again), str(plain)) == (0, "")
    assert rows_with_key(dsn, "twin") == [(twin, "failed"), (again, "queued")]


def test_retry_of_a_failed_job_whose_key_a_newer_job_took_is_refused(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed job 1 with key k; a newer job 2 took k and finished. Retried, job 1 would
    be live while a duplicate enqueue of k is answered with the newest job with the key
    (job 2, finished: the producer may not read status). Catches: that retry allowed (the
    duplicate answered with the finished job), and a refusal that does not say what to
    do instead (retry the newer failed job; enqueue a key whose newer job is done)."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)

    def finished(key: str, *, fail: bool) -> int:
        with JobStore.open(dsn) as store:
            store.insert_unique(job_spec({}, task="t", queue="n", unique_key=key))
            (job,) = store.claim("n", batch=1, lease=LEASE)
            if fail:
                store.fail(job.id, job.attempts, "boom", permanent=True)
            else:
                store.complete(job.id, job.attempts)
            return job.id

    old, done = finished("k", fail=True), finished("k", fail=False)
    code = main(["retry", str(old), "--dsn", dsn])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"job {old}'s unique key 'k' was taken again since by job {done} (done)" in err
    assert "enqueue the key again instead" in err
    assert rows_with_key(dsn, "k") == [(old, "failed"), (done, "done")]
    again = producer.enqueue_and_kick({}, task="t", unique_key="k", dsn=dsn, kicker=NoKicker())
    assert again not in (old, done)  # the key is free: a new job, not an old one's id

    older, newer = finished("f", fail=True), finished("f", fail=True)
    assert main(["retry", str(older), "--dsn", dsn]) == 1
    assert f"by job {newer} (failed): retry job {newer} instead" in capsys.readouterr().err
    assert main(["retry", str(newer), "--dsn", dsn]) == 0
    duplicate = producer.enqueue_and_kick({}, task="t", unique_key="f", dsn=dsn, kicker=NoKicker())
    assert duplicate == newer
