"""A cold start's connection opened while the handler still imports (issue 32.2): used by
the first invocation instead of a second, closed when that invocation needs none, only on
Lambda's on-demand initialisation, and its failures raised by the invocation exactly as
when the invocation connects itself. The handler loaded as Lambda loads it, real Postgres."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgkick.connections import db
from pgkick.connections.early import EarlyConnection
from pgkick.errors import DatabaseUnavailable, SchemaError
from pgkick.kick.kickers import NoKicker
from pgkick.store import flow
from pgkick.worker.cold_start import connect_ahead
from pgkick.worker.runtime import Runtime
from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import (
    event,
    load_handler,
    seed,
    sessions_gone,
    sessions_of,
    statement_calls,
)
from tests.store import JobStore


@pytest.fixture
def on_demand(dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("PGKICK_DATABASE_SECRET_ARN", raising=False)
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
    return dsn


def early_of(app: Any) -> EarlyConnection:
    """The handler module's cold-start connection, waited for (connected or failed)."""
    early = app.runtime.early
    assert isinstance(early, EarlyConnection)
    early.wait()
    return early


def test_the_first_invocation_drains_on_the_connection_its_cold_start_opened(
    on_demand: str,
) -> None:
    with JobStore.open(on_demand) as store:
        seed(store, 3)
    app = load_handler("worker")
    early_of(app)
    assert sessions_of(on_demand) == 1  # opened during the import, before any invocation
    opened = db.opened.count
    result = app.handler(event("kick"), FakeLambdaContext())
    assert result["done"] == 3
    assert db.opened.count == opened  # no second connection for the claim
    assert sessions_gone(on_demand)  # closed before the answer, as any invocation's
    assert app.runtime.early is None
    seed_and_drain = app.handler(event("kick"), FakeLambdaContext())  # warm: connects anew
    assert seed_and_drain["claimed"] == 0 and db.opened.count == opened + 1


def test_the_cold_starts_connection_has_the_claim_planned_and_nothing_claimed(
    on_demand: str,
) -> None:
    """The thread runs the claim once on its session (PL/pgSQL compiles it at its first
    run: a cold start's first claim no longer pays that), with a batch of 0 on a queue no
    job can be in: the jobs waiting are left as they were, and the invocation claims them."""
    with JobStore.open(on_demand) as store:
        ids = seed(store, 2)
    claims = statement_calls(on_demand, ["-- job_claim:%"])
    app = load_handler("worker")
    early_of(app)
    assert statement_calls(on_demand, ["-- job_claim:%"]) == claims + 1
    with JobStore.open(on_demand) as store:
        jobs = store.get_many(ids)
    assert [(j["status"], j["attempts"]) for j in jobs] == [("queued", 0), ("queued", 0)]
    assert app.handler(event("kick"), FakeLambdaContext())["done"] == 2


def test_the_cold_start_compiles_the_round_robin_only_when_a_queue_has_a_limit(
    on_demand: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The round robin of a queue with a rate or a concurrency (job_claim_fair_ids) is
    compiled, its walk planned, by the cold start's thread when some queue has such a
    limit, and not otherwise; that call claims, starts and records nothing, and the
    invocation claims the limited queue's jobs as before. Nested statements are counted
    (pg_stat_statements.track=all, for the thread's session only)."""
    tracked = make_conninfo(on_demand, options="-c pg_stat_statements.track=all")
    monkeypatch.setenv("DATABASE_URL", tracked)
    walk = ["WITH cursor_at (k) AS MATERIALIZED%"]  # job_claim_fair_ids's first statement
    before = statement_calls(on_demand, walk)
    early_of(load_handler("worker")).close()
    assert statement_calls(on_demand, walk) == before  # no queue with a limit: not called
    with JobStore.open(on_demand) as store:
        flow.set_queue_rate(store, "default", 5, timedelta(minutes=1))
        ids = seed(store, 2)
    app = load_handler("worker")
    early_of(app)
    assert statement_calls(on_demand, walk) == before + 1
    with psycopg.connect(on_demand, autocommit=True) as conn:
        written = conn.execute(
            "SELECT (SELECT count(*) FROM pgkick.job_starts),"
            " (SELECT count(*) FROM pgkick.queue_claim_cursors)"
        ).fetchone()
    assert written == (0, 0)
    with JobStore.open(on_demand) as store:
        jobs = store.get_many(ids)
    assert [(j["status"], j["attempts"]) for j in jobs] == [("queued", 0), ("queued", 0)]
    assert app.handler(event("kick"), FakeLambdaContext())["done"] == 2


def test_a_first_invocation_that_connects_nothing_closes_the_cold_starts_connection(
    on_demand: str,
) -> None:
    app = load_handler("worker")
    early_of(app)
    assert sessions_of(on_demand) == 1
    answer = app.handler({"queue": ""}, FakeLambdaContext())  # rejected before any drain
    assert "must not be empty" in answer["rejected"]
    assert sessions_gone(on_demand) and app.runtime.early is None


@pytest.mark.parametrize("initialization", [None, "provisioned-concurrency", "snap-start"])
def test_only_an_on_demand_cold_start_connects_ahead(dsn: str, initialization: str | None) -> None:
    """A provisioned or SnapStart environment initialises long before its first
    invocation: a connection opened then would hold a session (a database kept awake)."""
    env = {"DATABASE_URL": dsn, "PGKICK_KICKER": "none"}
    assert (
        connect_ahead(
            env
            if initialization is None
            else {**env, "AWS_LAMBDA_INITIALIZATION_TYPE": initialization}
        )
        is None
    )
    assert sessions_gone(dsn)


def test_settings_that_do_not_parse_start_nothing_and_fail_the_init_as_before(
    on_demand: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGKICK_BATCH", "many")
    assert connect_ahead() is None
    with pytest.raises(Exception, match="PGKICK_BATCH") as raised:
        load_handler("worker")
    assert type(raised.value).__name__ == "ConfigError"
    assert sessions_gone(on_demand)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def runtime_for(dsn: str, early: EarlyConnection | None) -> Runtime:
    from pgkick.config import Settings

    settings = Settings.from_env({"PGKICK_KICKER": "none", "PGKICK_CONNECT_RETRIES": "0"})
    return Runtime(settings, NoKicker(), dsn=lambda: dsn, early=early)


def drain_error(runtime: Runtime) -> BaseException:
    with pytest.raises((DatabaseUnavailable, SchemaError)) as raised:
        runtime.drain("default", lambda: 60_000)
    return raised.value


@pytest.mark.parametrize("database", ["refused", "no schema"])
def test_what_the_cold_start_met_is_raised_by_the_invocation_as_when_it_connects(
    database: str, empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same error, type and words, whether the thread or the invocation connected;
    and the invocation after it connects anew (the schema migrated meanwhile: it drains)."""
    dsn = (
        psycopg.conninfo.make_conninfo(empty_dsn, port=closed_port(), host="127.0.0.1")
        if database == "refused"
        else empty_dsn
    )
    env = {"DATABASE_URL": dsn, "PGKICK_KICKER": "none", "PGKICK_CONNECT_RETRIES": "0"}
    monkeypatch.setenv("DATABASE_URL", dsn)
    early = connect_ahead({**env, "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"})
    assert early is not None
    early.wait()
    opened = db.opened.count
    ahead = drain_error(runtime_for(dsn, early))
    assert db.opened.count == opened  # the thread's failure, not a second attempt's
    itself = drain_error(runtime_for(dsn, None))
    assert type(ahead) is type(itself) and str(ahead) == str(itself)
    assert sessions_gone(empty_dsn)
    assert ("cannot connect" if database == "refused" else "schema is missing") in str(ahead)
    if database == "no schema":
        from pgkick.store import migrations

        runtime = runtime_for(
            dsn, connect_ahead({**env, "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"})
        )
        drain_error(runtime)
        with JobStore.open(dsn) as store:
            migrations.migrate(store)
            seed(store, 2)
        assert runtime.drain("default", lambda: 60_000).done == 2
        assert sessions_gone(dsn)


def test_a_cold_start_reads_a_rotated_secret_again_as_an_invocation_does(
    dsn: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread read the secret from the process's cache, the password has rotated since:
    the thread and the invocation each read it once more (pgkick.connections.db.connect)."""
    import json
    import uuid

    import boto3

    info = psycopg.conninfo.conninfo_to_dict(dsn)
    role, before, after = (f"{p}{uuid.uuid4().hex[:8]}" for p in ("app_", "old", "new"))
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{before}'")
        admin.execute(f"GRANT USAGE ON SCHEMA pgkick TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgkick TO {role}"
        )

    def secret(password: str) -> str:
        where = {"host": info["host"], "port": int(str(info["port"])), "dbname": info["dbname"]}
        return json.dumps({"username": role, "password": password, **where})

    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="pgkick/cold", SecretString=secret(before))["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", arn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setenv("PGKICK_CONNECT_RETRIES", "0")
    try:
        assert load_handler("worker").handler(event("kick"), FakeLambdaContext())["claimed"] == 0
        with psycopg.connect(dsn, autocommit=True) as admin:  # cached: the old password
            admin.execute(f"ALTER ROLE {role} PASSWORD '{after}'")
        secrets.put_secret_value(SecretId=arn, SecretString=secret(after))
        with JobStore.open(dsn) as store:
            seed(store, 2)
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
        early = early_of(load_handler("worker")).take()  # the thread reads it again itself
        assert early is not None and not early.closed
        early.close()
        app = load_handler("worker")  # the next cold start too, and drains on it
        early_of(app)
        opened = db.opened.count
        assert app.handler(event("kick"), FakeLambdaContext())["done"] == 2
        assert db.opened.count == opened  # on the connection its thread opened
        assert sessions_gone(dsn, role) and sessions_gone(dsn)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_the_runtime_without_a_cold_start_connection_is_unchanged(dsn: str) -> None:
    with JobStore.open(dsn) as store:
        seed(store, 1)
    opened = db.opened.count
    summary = runtime_for(dsn, None).drain("default", lambda: 60_000)
    assert summary.done == 1 and db.opened.count == opened + 1
    assert sessions_gone(dsn)


def test_a_thread_that_failed_unexpectedly_leaves_the_invocation_to_connect(dsn: str) -> None:
    """Anything but pgkick's own errors (an import race in the thread, a driver's surprise)
    is not raised by the invocation: it connects itself, as without the thread."""

    def unexpected() -> db.Connection:
        raise RuntimeError("deadlock detected by _ModuleLock('http.client')")

    early = EarlyConnection(unexpected)
    with JobStore.open(dsn) as store:
        seed(store, 1)
    opened = db.opened.count
    assert runtime_for(dsn, early).drain("default", lambda: 60_000).done == 1
    assert db.opened.count == opened + 1 and sessions_gone(dsn)
