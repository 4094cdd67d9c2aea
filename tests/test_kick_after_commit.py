"""A kick (or wake-up) is sent only once its jobs are committed, for all three ways to enqueue.

The kicker is a `CommitWitness`: when called it looks at the database from its own
connection, so a kick sent just before the commit (still inside the transaction
block) sees no job and a session still in a transaction, while the same kick just
after the commit sees the jobs. Each test uses a fresh database and one enqueue per
queue it checks: a producer may skip a kick while a worker or a kick is already on
the queue, never the first one.
"""

from __future__ import annotations

import psycopg

from pgkick.producer import enqueue as producer
from tests.commit_witness import Call, CommitWitness

HOUR = 3600  # a delay far enough ahead to be booked as a wake-up, not kicked now


def test_transaction_kicks_only_once_its_jobs_are_visible_to_other_sessions(dsn: str) -> None:
    """Catches: `pgkick.transaction()` sending its kicks and wake-ups just before the
    commit (inside its `with conn.transaction()` block): the witness would see no job
    and the app's connection still in a transaction."""
    with psycopg.connect(dsn) as conn:
        witness = CommitWitness(dsn, app_conn=conn)
        with producer.transaction(conn, kicker=witness) as jobs:
            mail = jobs.enqueue({"order": 42}, task="receipt", queue="mail")
            stock = jobs.enqueue({"order": 42}, task="stock", queue="warehouse")
            later = jobs.enqueue({"order": 42}, task="survey", queue="later", delay=HOUR)
            assert witness.calls == []
    assert witness.by_queue() == {
        "mail": [Call("mail", "kick", [mail], 0, False)],
        "warehouse": [Call("warehouse", "kick", [stock], 0, False)],
        "later": [Call("later", "wake", [later], 0, False)],
    }


def test_enqueue_and_kick_kicks_only_once_its_job_is_visible_to_other_sessions(
    dsn: str,
) -> None:
    """Catches: `enqueue_and_kick` kicking (or booking the wake-up) before its insert
    commits, e.g. inside a transaction on the producer's connection: the witness
    would see no job and the producer's session still in a transaction."""
    witness = CommitWitness(dsn)
    now = producer.enqueue_and_kick(
        {"to": "a@b.c"}, task="send", queue="mail", dsn=dsn, kicker=witness
    )
    later = producer.enqueue_and_kick(
        {"to": "a@b.c"}, task="remind", queue="later", delay=HOUR, dsn=dsn, kicker=witness
    )
    assert witness.by_queue() == {
        "mail": [Call("mail", "kick", [now], 0, None)],
        "later": [Call("later", "wake", [later], 0, None)],
    }


def test_enqueue_many_kicks_only_once_all_its_jobs_are_visible_to_other_sessions(
    dsn: str,
) -> None:
    """Catches: `enqueue_many` kicking before its one commit (inside the transaction
    that inserts the chunks): the witness would see none of the jobs and the
    producer's session still in a transaction."""
    witness = CommitWitness(dsn)
    jobs = [
        *({"payload": {"n": n}, "task": "noop", "queue": "q1"} for n in range(3)),
        *({"payload": {"n": n}, "task": "noop", "queue": "q2"} for n in range(2)),
        {"payload": {}, "task": "noop", "queue": "later", "delay": HOUR},
    ]
    ids = producer.enqueue_many(jobs, dsn=dsn, kicker=witness)
    assert witness.by_queue() == {
        "q1": [Call("q1", "kick", ids[:3], 0, None)],
        "q2": [Call("q2", "kick", ids[3:5], 0, None)],
        "later": [Call("later", "wake", ids[5:], 0, None)],
    }
