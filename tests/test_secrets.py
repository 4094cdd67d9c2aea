"""No password in any message, whatever shape its DSN or database secret has."""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from psycopg.conninfo import conninfo_to_dict

from pgkick import cli, config
from pgkick.connections.db import connect
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.local.context import FakeLambdaContext
from tests.helpers import event, load_handler


def everything_said(
    call: Callable[[], Any],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """What a call raised (with its whole traceback chain), printed and logged."""
    caplog.clear()
    caplog.set_level(logging.INFO)  # botocore's DEBUG wire log shows any secret it fetches
    for name in ("pgkick", "aws_lambda_powertools", "pgkick-worker", "pgkick-reaper"):
        caplog.set_level(logging.DEBUG, logger=name)
    texts = []
    try:
        texts.append(json.dumps(call(), default=str))
    except Exception as exc:
        texts += [repr(exc), *traceback.format_exception(exc)]
    captured = capsys.readouterr()
    texts += [captured.out, captured.err]
    texts += [json.dumps(record.__dict__, default=str) for record in caplog.records]
    texts += [record.getMessage() for record in caplog.records]
    return "\n".join(texts)


def malformed(dsn: str, token: str) -> list[str]:
    """The same server, its password written in the shapes libpq quotes back in errors."""
    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    where = f"{parts['host']}:{parts['port']}/{parts['dbname']}"
    return [
        f"postgresql://{parts['user']}:pw%g{token}@{where}",  # an unencoded %
        f"postgresql://{parts['user']}:pw {token}@{where}",  # a space
        f"postgresql://{parts['user']}:pw@{token}@{where}",  # an @
        f"postgresql://{parts['user']}:pw@{token}:x@{where}",  # an @ and a :
        f"host={parts['host']} port={parts['port']} password=pw {token} user={parts['user']}",
        f"host={parts['host']} password=pw{token}' user={parts['user']}",  # a stray quote
        # double quotes, as a shell quotes (libpq's are single): it reads `"pw`, then
        # `{token}"`, which its error quotes back with the double quote attached
        f'host={parts["host"]} port={parts["port"]} password="pw {token}" user={parts["user"]}',
        # a space, then base64's padding: libpq reads `{token}==` as an option of its own
        f"host={parts['host']} port={parts['port']} password=pw {token}== user={parts['user']}",
        f"{parts['user']}:pw{token}@{where}",  # a URL without its scheme
        f"postgresql:/{parts['user']}:pw{token}@{where}",  # a slash short
        f'postgresql://{parts["user"]}:pw"{token}%g@{where}',  # a double quote and a %
    ]


def test_a_malformed_dsns_password_appears_in_no_error_output_or_log(
    dsn: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches libpq's parse errors reaching the user unredacted: `invalid percent-encoded
    token: "pw%g..."`, `failed to resolve host '...@127.0.0.1'`, `missing "=" after ...`
    carried the password into exceptions (and their chained causes), CLI errors, handler
    failures and logs. Every path, every shape: the password's text appears nowhere."""
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setattr("pgkick.kick.default._default", None)
    for bad in malformed(dsn, token := uuid.uuid4().hex):
        monkeypatch.setenv("DATABASE_URL", bad)
        calls: list[Callable[[], Any]] = [
            lambda bad=bad: connect(bad),
            lambda bad=bad: cli.main(["status", "--dsn", bad]),
            lambda: cli.main(["enqueue", "noop", "--json"]),  # $DATABASE_URL
            lambda: producer.enqueue_and_kick({}, task="noop", kicker=NoKicker()),
            lambda: load_handler("worker").handler(event("kick"), FakeLambdaContext()),
            lambda: load_handler("reaper").handler(event("reaper"), FakeLambdaContext()),
        ]
        for call in calls:
            said = everything_said(call, caplog, capsys)
            assert token not in said, said
            assert "PostgreSQL" in said or "pgkick" in said  # it did fail, and said so


@pytest.mark.parametrize(
    "shape",
    [
        "host=db.internal user=app password={pw} dbname=app",  # keyword form
        '{{"username": "app", "password": "{pw}"}}',  # JSON without a host
        '["postgresql://app:{pw}@db.internal/app"]',  # a JSON list
        '{{"url": ["postgresql://app:{pw}@db.internal/app"]}}',  # url not a string
        '{{"username": "app", "password": "{pw}", "host": "db.internal", "port": "5432 x"}}',
    ],
)
def test_config_errors_from_a_malformed_secret_never_include_it(
    shape: str,
    aws: None,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches a configuration error that quotes the secret it could not parse (issue #19,
    item 5): the message, its traceback and every log record (DEBUG included, where
    Powertools' parameter utility logs) must be free of the secret's password."""
    password = f"s3cret-{uuid.uuid4().hex}"
    arn = boto3.client("secretsmanager").create_secret(
        Name=f"pgkick/{uuid.uuid4().hex[:6]}", SecretString=shape.format(pw=password)
    )["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", arn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    said = everything_said(config.database_url, caplog, capsys)
    assert "database secret" in said or "PostgreSQL" in said
    said += everything_said(
        lambda: load_handler("worker").handler(event("kick"), FakeLambdaContext()), caplog, capsys
    )
    assert password not in said and password[7:] not in said


def test_a_secret_written_from_a_file_connects_and_a_binary_one_not_utf8_is_named(
    dsn: str, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret's text with whitespace around it (`--secret-string file://dsn.txt` keeps the
    file's final newline) is the DSN without it; a SecretBinary that is not UTF-8 text is a
    ConfigError saying so, without its bytes. Catches the newline kept in the database's
    name (the server: database "x\\n" does not exist), a leading space refused as "neither a
    postgresql:// URL nor JSON", and a bare UnicodeDecodeError."""
    from pgkick.awsapi import secrets

    client = boto3.client("secretsmanager")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    parts = conninfo_to_dict(dsn)
    rds = json.dumps({"username": parts["user"], "password": parts.get("password", ""),
                      "host": parts["host"], "port": int(str(parts["port"])),
                      "dbname": parts["dbname"]})  # fmt: skip
    url = "postgresql://{user}:{password}@{host}:{port}/{dbname}".format(  # dsn: keywords
        **{k: quote(str(v), safe="") for k, v in parts.items()}
    )
    for text in (url + "\n", f"  {url}\r\n", f"\n{rds}\n"):
        arn = client.create_secret(Name=f"pgkick/{uuid.uuid4().hex[:6]}", SecretString=text)
        monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", arn["ARN"])
        secrets.forget()
        with connect(config.database_url()) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (parts["dbname"],)
    password = f"s3cret-{uuid.uuid4().hex}"
    blob = f"postgresql://app:{password}\xe9@db/app".encode("latin-1")
    arn = client.create_secret(Name=f"pgkick/{uuid.uuid4().hex[:6]}", SecretBinary=blob)
    monkeypatch.setenv("PGKICK_DATABASE_SECRET_ARN", arn["ARN"])
    secrets.forget()
    with pytest.raises(config.ConfigError, match="SecretBinary is not UTF-8") as refused:
        config.database_url()
    assert password not in "".join(traceback.format_exception(refused.value))
