"""The producer's lingering connection: reused while enqueues come, closed soon after."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import psycopg
import pytest

from pgkick.connections import linger
from pgkick.connections import pool as linger_pool
from pgkick.connections.linger import APPLICATION_NAME, LingeringConnection
from pgkick.errors import ConfigError
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from tests.helpers import Ticks, sessions_of


@pytest.fixture(autouse=True)
def _no_lingering_left() -> Iterator[None]:
    yield
    linger.close_all()


def backend_pid(lingering: LingeringConnection) -> int:
    with lingering.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def producer_sessions(dsn: str) -> int:
    return sessions_of(dsn, APPLICATION_NAME)


def test_reused_while_calls_come_and_closed_after_linger(dsn: str) -> None:
    ticks = Ticks()
    lingering = LingeringConnection(dsn, 1.0, clock=ticks, closer=False)
    first = backend_pid(lingering)
    ticks.now += 0.9
    assert backend_pid(lingering) == first and lingering.opened == 1
    ticks.now += 0.9  # 0.9 s since the last use: still lingering
    assert not lingering.close_if_idle()
    assert producer_sessions(dsn) == 1
    ticks.now += 0.1
    assert lingering.close_if_idle()
    assert producer_sessions(dsn) == 0
    assert backend_pid(lingering) != first and lingering.opened == 2


def test_the_closer_thread_ends_the_session_without_help(dsn: str) -> None:
    closed = threading.Event()
    lingering = LingeringConnection(dsn, 0.05, on_close=closed.set)
    backend_pid(lingering)
    assert closed.wait(10)
    assert producer_sessions(dsn) == 0


def test_a_connection_the_server_ended_is_replaced_before_use(dsn: str) -> None:
    lingering = LingeringConnection(dsn, 60, closer=False)
    first = backend_pid(lingering)
    with psycopg.connect(dsn, autocommit=True) as admin:  # waits until the backend has exited
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (first,))
    with lingering.connection() as conn:
        conn.execute(
            "INSERT INTO pgkick.jobs (queue, task, payload, run_at) VALUES ('q', 't', '{}', now())"
        )
    assert lingering.opened == 2
    with psycopg.connect(dsn) as check:
        assert check.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (1,)


def test_a_busy_connection_is_not_waited_for(dsn: str) -> None:
    lingering = LingeringConnection(dsn, 60, closer=False)
    with lingering.connection() as held:
        mine = held.execute("SELECT pg_backend_pid()").fetchone()
        other = backend_pid(lingering)  # the shared one is busy: a connection of its own
        assert (other,) != mine
    assert producer_sessions(dsn) == 1  # the extra one closed at once
    assert (backend_pid(lingering),) == mine


def test_a_failed_statement_keeps_the_connection_a_broken_one_drops_it(dsn: str) -> None:
    lingering = LingeringConnection(dsn, 60, closer=False)
    first = backend_pid(lingering)
    with pytest.raises(psycopg.errors.DivisionByZero):
        with lingering.connection() as conn:
            conn.execute("SELECT 1 / 0")
    assert backend_pid(lingering) == first
    with pytest.raises(psycopg.OperationalError):
        with lingering.connection() as conn:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert producer_sessions(dsn) == 0 and lingering.opened == 1
    assert backend_pid(lingering) != first


def test_a_forked_child_opens_its_own_and_leaves_the_parents_alone(dsn: str) -> None:
    lingering = LingeringConnection(dsn, 60, closer=False)
    parent = backend_pid(lingering)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit code
        try:
            code = 0 if backend_pid(lingering) != parent else 1
            lingering.close()
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend_pid(lingering) == parent  # still alive, still ours


def test_enqueue_and_kick_reuses_one_session_and_zero_linger_keeps_none(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    producer.enqueue_many([{"payload": {}, "task": "noop"}], dsn=dsn, kicker=NoKicker())
    assert linger_pool.shared(dsn, 1.0).opened == 1 and producer_sessions(dsn) == 1
    linger.close_all()
    assert producer_sessions(dsn) == 0
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "0")
    producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    assert producer_sessions(dsn) == 0


def test_a_bad_linger_setting_names_itself_and_writes_nothing(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "soon")
    with pytest.raises(ConfigError, match="PGKICK_PRODUCER_LINGER_MS='soon'"):
        producer.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker())
    with psycopg.connect(dsn) as check:
        assert check.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)
