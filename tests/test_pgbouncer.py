"""pgkick on the app's own connection through a real PgBouncer in transaction mode."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import pgkick
from pgkick.kick.kickers import NoKicker
from pgkick_dev.embedded import EmbeddedPostgres
from tests.pgbouncer import pgbouncer, requires_pgbouncer

pytestmark = requires_pgbouncer


def _through_pgbouncer(
    dsn: str,
    embedded_pg: EmbeddedPostgres | None,
    clients: int,
    session: Callable[[int, str, psycopg.Connection[Any]], None],
) -> list[str]:
    """Run `session(n, pooled_dsn, conn)` for each of `clients` threads, each on an app
    connection opened as the README shows, through a transaction-mode PgBouncer with 2
    server connections; returns the first line of every database error they met."""
    os_user = embedded_pg.os_user if embedded_pg else None
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    errors: list[str] = []
    with pgbouncer(dsn, os_user, pool_size=2) as pooled:
        pooled_dsn = make_conninfo(pooled, dbname=dbname)

        def app(n: int) -> None:
            with psycopg.connect(pooled_dsn) as conn:
                try:
                    session(n, pooled_dsn, conn)
                except psycopg.Error as exc:
                    errors.append(str(exc).splitlines()[0])

        threads = [threading.Thread(target=app, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    return errors


def _count_jobs(dsn: str) -> Any:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone()


def test_transactions_on_the_apps_connection_through_pgbouncer(
    dsn: str, embedded_pg: EmbeddedPostgres | None
) -> None:
    """Catches pgkick's statements being server-prepared on a connection it does not own:
    the app opens it as the README shows (psycopg.connect, default prepare_threshold), so
    after 5 runs psycopg prepared the insert as _pg3_0 on whichever server connection the
    pooler lent, and other clients then failed with `prepared statement "_pg3_0" already
    exists` / `does not exist` (16-18 of 160 transactions). Every transaction must commit."""

    def session(n: int, pooled_dsn: str, conn: psycopg.Connection[Any]) -> None:
        for i in range(20):
            with pgkick.transaction(conn, kicker=NoKicker()) as jobs:
                jobs.enqueue({"client": n, "i": i}, task="noop")

    assert _through_pgbouncer(dsn, embedded_pg, 8, session) == []
    assert _count_jobs(dsn) == (160,)


class _Counting:
    def __init__(self) -> None:
        self.kicks = 0
        self.lock = threading.Lock()

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        with self.lock:
            self.kicks += 1

    def wake_at(self, queue: str, when: object) -> None:
        return None


def test_the_kick_reservation_rides_the_pipeline_through_pgbouncer(
    dsn: str, embedded_pg: EmbeddedPostgres | None
) -> None:
    """enqueue_and_kick sends BEGIN; INSERT; COMMIT; reserve in one pipeline, and
    transaction() re-reads its jobs and reserves after the app's commit: through a
    transaction-mode pooler every job must commit, and kicks stay one per pending window
    (they are reserved in the database, whichever server connection the pooler lends)."""
    kicker = _Counting()

    def session(n: int, pooled_dsn: str, conn: psycopg.Connection[Any]) -> None:
        for i in range(10):
            pgkick.enqueue_and_kick({"n": n, "i": i}, task="noop", dsn=pooled_dsn, kicker=kicker)
            with pgkick.transaction(conn, kicker=kicker) as jobs:
                jobs.enqueue({"n": n, "i": i, "tx": True}, task="noop")

    assert _through_pgbouncer(dsn, embedded_pg, 6, session) == []
    assert _count_jobs(dsn) == (120,)
    assert kicker.kicks == 1  # nobody ever took the pending kick up: one kick for them all
