"""Keyed batches racing in processes: inserted in key order, they never deadlock.

Two processes enqueue_many the same unique keys at the same moment, one list reversed.
Inserted in batch order each transaction would wait for a key the other inserted
first, and PostgreSQL would abort one of them (DeadlockDetected, nothing written).
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import psycopg

from pgkick import aio
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer

KEYS = 400
ROUNDS = 8


def _batch(round_: int, reverse: bool) -> list[dict[str, Any]]:
    keys = [f"r{round_}-k{n:03d}" for n in range(KEYS)]
    return [
        {"payload": {}, "task": "t", "unique_key": key}
        for key in (reversed(keys) if reverse else keys)
    ]


def _producer(dsn: str, reverse: bool, use_aio: bool, barrier: Any, errors: Any) -> None:
    import asyncio

    for round_ in range(ROUNDS):
        barrier.wait(60)
        try:
            if use_aio:
                asyncio.run(aio.enqueue_many(_batch(round_, reverse), dsn=dsn, kicker=NoKicker()))
            else:
                producer.enqueue_many(_batch(round_, reverse), dsn=dsn, kicker=NoKicker())
        except Exception as error:  # reported to the test, which fails naming it
            errors.put(f"round {round_}: {type(error).__name__}: {error}".splitlines()[0])


def _race(dsn: str, use_aio: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, errors = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_producer, args=(dsn, reverse, use_aio, barrier, errors))
        for reverse in (False, True)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(300)
        assert proc.exitcode == 0
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert failures == []
    with psycopg.connect(dsn) as conn:
        counts = conn.execute(
            "SELECT count(*), count(DISTINCT unique_key) FROM pgkick.jobs"
        ).fetchone()
    assert counts == (KEYS * ROUNDS, KEYS * ROUNDS)


def test_racing_keyed_batches_in_opposite_orders_never_deadlock(dsn: str) -> None:
    _race(dsn, use_aio=False)


def test_racing_async_keyed_batches_in_opposite_orders_never_deadlock(dsn: str) -> None:
    _race(dsn, use_aio=True)
