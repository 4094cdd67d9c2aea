"""A lone `enqueue_and_kick`: its INSERT committed by itself, then its kick reserved.

What a lone job sends is read from the server (pg_stat_statements), not from the
library: the group's pipeline (BEGIN; INSERT; COMMIT; reserve) cost a lone job about
70 us of client CPU a statement, so a lone job is one INSERT in its own transaction,
followed by the reservation only when there is a kick to reserve.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg
import pytest

from pgkick import aio
from pgkick.errors import MisuseError
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick.store.producer import ProducerStore
from pgkick.validation import job_spec
from tests.helpers import calls_between, statements_sent
from tests.test_producer import RecordingKicker

SENT = {
    "begin": ["-- transaction_begin:%"],
    "commit": ["-- transaction_commit:%"],
    "insert": ["-- job_insert:%"],
    "reserve": ["-- queue_kick_reserve:%"],
}


def sent(dsn: str) -> dict[str, int]:
    return statements_sent(dsn, SENT)


def test_a_lone_job_is_one_insert_and_one_reservation_when_it_has_a_kick(dsn: str) -> None:
    """Catches: a lone job sent as the group's pipeline (an explicit BEGIN and COMMIT
    around its INSERT), and a reservation sent when there is no kick to reserve."""
    producer.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())  # the session opened
    before = sent(dsn)
    producer.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())
    middle = sent(dsn)
    assert calls_between(before, middle) == {"begin": 0, "commit": 0, "insert": 1, "reserve": 0}
    kicker = RecordingKicker()
    producer.enqueue_and_kick({}, task="t", queue="q", dsn=dsn, kicker=kicker)
    assert calls_between(middle, sent(dsn)) == {"begin": 0, "commit": 0, "insert": 1, "reserve": 1}
    assert kicker.kicks == [("q", "enqueue")]


def test_the_asyncio_lone_job_sends_what_the_synchronous_one_sends(dsn: str) -> None:
    """Catches: pgkick.aio keeping the group's pipeline for a lone job (its own plan)."""

    async def main() -> list[dict[str, int]]:
        await aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())  # the session
        marks = [sent(dsn)]
        await aio.enqueue_and_kick({}, task="t", dsn=dsn, kicker=NoKicker())
        marks.append(sent(dsn))
        await aio.enqueue_and_kick({}, task="t", queue="q", dsn=dsn, kicker=RecordingKicker())
        marks.append(sent(dsn))
        return marks

    before, middle, after = asyncio.run(asyncio.wait_for(main(), 30))
    assert calls_between(before, middle) == {"begin": 0, "commit": 0, "insert": 1, "reserve": 0}
    assert calls_between(middle, after) == {"begin": 0, "commit": 0, "insert": 1, "reserve": 1}


def test_a_failed_reservation_after_the_commit_kicks_and_never_raises(dsn: str) -> None:
    """Catches: an exception after the job committed (its caller would enqueue it again),
    and no kick when who watches the queue is unknown."""
    with psycopg.connect(dsn, autocommit=True) as conn:  # the reservation's insert refused
        conn.execute(
            "ALTER TABLE pgkick.queue_watchers ADD CONSTRAINT refuse CHECK (false) NOT VALID"
        )
    kicker = RecordingKicker()
    job_id = producer.enqueue_and_kick({"n": 1}, task="t", queue="q", dsn=dsn, kicker=kicker)
    assert kicker.kicks == [("q", "enqueue")]
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT status FROM pgkick.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("queued",)


def test_a_lone_insert_refuses_a_connection_in_a_transaction_before_writing(dsn: str) -> None:
    """Catches: a lone insert that would not commit by itself (its reservation would run
    before the job's commit, and the job commit with the app's transaction, or not)."""
    with psycopg.connect(dsn) as conn:  # autocommit off
        store = ProducerStore(conn)
        with pytest.raises(MisuseError, match="autocommit"):
            store.insert_and_reserve(
                job_spec({}, task="t"), reserve=True, pending=timedelta(seconds=30)
            )
        conn.rollback()
        count = conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone()
    assert count == (0,)
