"""A password rotation inside the secret's 5-minute cache (issue #30, defect 6): the
worker reads the secret once more when the database refuses the cached password, instead
of failing every invocation (and burning Lambda's retries) until the cache expires.
Real PostgreSQL (a role whose password changes), Secrets Manager on moto."""

from __future__ import annotations

import json
import uuid

import boto3
import psycopg
import pytest

from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import event, job_row, load_handler, seed, sessions_of
from tests.store import JobStore


def rds_secret(info: dict[str, object], password: str) -> str:
    return json.dumps(
        {
            "username": info["user"],
            "password": password,
            "host": info["host"],
            "port": int(str(info["port"])),
            "dbname": info["dbname"],
        }
    )


def test_a_rotated_password_is_read_again_not_failed_for_five_minutes(
    dsn: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    role = f"app_{uuid.uuid4().hex[:8]}"
    before, after = f"old-{uuid.uuid4().hex}", f"new-{uuid.uuid4().hex}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{before}'")
        admin.execute(f"GRANT USAGE ON SCHEMA pgkick TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgkick TO {role}"
        )
    info["user"] = role
    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="pgkick/rotated", SecretString=rds_secret(info, before))["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", arn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setenv("PGKICK_CONNECT_RETRIES", "0")
    try:
        app = load_handler("worker")
        with JobStore.open(dsn) as store:
            seed(store, 1)
        assert app.handler(event("kick"), FakeLambdaContext())["done"] == 1  # secret cached
        # the rotation: the database and the secret change; the worker's cache does not
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"ALTER ROLE {role} PASSWORD '{after}'")
        secrets.put_secret_value(SecretId=arn, SecretString=rds_secret(info, after))
        with JobStore.open(dsn) as store:
            seed(store, 2)
        assert app.handler(event("kick"), FakeLambdaContext())["done"] == 2
        assert sessions_of(dsn) == 0
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def _rotating_role(dsn: str) -> tuple[dict[str, object], str, str]:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    role = f"app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'before-{role}'")
        admin.execute(f"GRANT USAGE ON SCHEMA pgkick TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgkick TO {role}"
        )
        admin.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgkick TO {role}")
    info["user"] = role
    return info, f"before-{role}", f"after-{role}"


def test_a_producer_reads_a_rotated_password_again_not_failed_for_five_minutes(
    dsn: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer's side of the rotation (a review, 2026-12-05): an app enqueuing with
    PGKICK_DATABASE_SECRET_ARN kept the old password for the secret's 5-minute cache, so
    every enqueue that opened a connection failed until then. Now the connection refused
    with the cached password reads the secret once more (the sync and asyncio producers)."""
    import asyncio

    import pgkick
    from pgkick import aio

    info, before, after = _rotating_role(dsn)
    role = str(info["user"])
    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="pgkick/producer", SecretString=rds_secret(info, before))[
        "ARN"
    ]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", arn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setenv("PGKICK_PRODUCER_LINGER_MS", "0")  # a new connection every call
    try:

        def rotate(password: str) -> None:
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute(f"ALTER ROLE {role} PASSWORD '{password}'")
            secrets.put_secret_value(SecretId=arn, SecretString=rds_secret(info, password))

        first = pgkick.enqueue_and_kick({}, task="noop")  # the secret read and cached
        rotate(after)
        second = pgkick.enqueue_and_kick({}, task="noop")
        rotate(before)  # and again, for the asyncio producer
        third = asyncio.run(aio.enqueue_and_kick({}, task="noop"))
        assert len({first, second, third}) == 3
        assert all(job_row(dsn, job)["status"] == "queued" for job in (first, second, third))
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_a_refused_password_is_the_error_shown_whatever_the_environment(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal asks config whether a rotated secret could help: with a variable config
    refuses (a bad PGKICK_SCHEMA), the server's refusal is still the error, not the
    variable's (read-through of the rotation fix)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from pgkick.connections.db import connect
    from pgkick.errors import DatabaseUnavailable

    wrong = make_conninfo(**{**conninfo_to_dict(dsn), "password": "not-the-password"})
    monkeypatch.setenv("PGKICK_SCHEMA", "Bad-Name")
    with pytest.raises(DatabaseUnavailable, match="password authentication failed"):
        connect(wrong)
