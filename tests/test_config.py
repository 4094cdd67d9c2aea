"""The settings are read in one place and passed down; nothing writes the environment."""

from __future__ import annotations

import ast
import os
from datetime import timedelta
from pathlib import Path

import pytest

from pgkick import config
from pgkick.connections.db import Database

ROOT = Path(__file__).resolve().parent.parent
# The one package of the runtime that reads os.environ (pgkick.config, split into three modules)
READERS = {f"functions/pgkick/config/{name}.py" for name in ("__init__", "app", "readers")}


def _environ_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv", "putenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_only_config_reads_the_environment() -> None:
    """Catches a module below the entry points reading a variable at call time (as db.py
    once read PGKICK_SCHEMA per statement) or writing os.environ (as the CLI and the
    test kit once did). The handlers' module-level Powertools names are the exception:
    Powertools itself reads them there; so are pgkick.awsapi.signed_http, which reads the
    Lambda runtime's AWS_* variables where boto3 would have, and pgkick.awsapi.signature,
    which reads AWS_SESSION_TOKEN to keep it out of error messages."""
    allowed = {"functions/pgkick/aws/worker.py", "functions/pgkick/aws/reaper.py"} | READERS
    allowed.add("functions/pgkick/awsapi/signed_http.py")  # AWS's own variables, as boto3 reads
    allowed.add("functions/pgkick/awsapi/signature.py")  # AWS_SESSION_TOKEN, kept out of messages
    uses = [
        use
        for path in sorted((ROOT / "functions" / "pgkick").rglob("*.py"))
        for use in _environ_uses(path)
        if use.split(":")[0] not in allowed
    ]
    assert uses == []


def test_app_settings_are_parsed_once_per_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches the app side's settings re-parsed at every call (the same object must come
    back while the environment is unchanged) or kept stale after it changed."""
    monkeypatch.setenv("PGKICK_KICK_PENDING_MS", "2500")
    first = config.app_settings()
    assert config.app_settings() is first and first.kick_pending == timedelta(seconds=2.5)
    monkeypatch.setenv("PGKICK_KICK_PENDING_MS", "4000")
    assert config.app_settings().kick_pending == timedelta(seconds=4)


def test_overriding_reaches_the_layers_without_writing_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches the CLI's --schema or the test kit's database reaching the statements by
    writing os.environ (visible to every thread and child process, and left behind when
    the block raises), or not reaching them at all."""
    monkeypatch.delenv("PGKICK_SCHEMA", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db/app")
    before = dict(os.environ)
    with config.overriding(schema="tenant_one", database_url="postgresql://test@db/test"):
        assert Database(conn=None).schema == "tenant_one"  # type: ignore[arg-type]
        assert config.app_settings().dsn() == "postgresql://test@db/test"
        assert dict(os.environ) == before
    assert Database(conn=None).schema == config.DEFAULT_SCHEMA  # type: ignore[arg-type]
    assert config.app_settings().dsn() == "postgresql://app@db/app"
    with pytest.raises(config.ConfigError, match="lowercase identifier"):
        with config.overriding(schema="Bad-Name"):
            pass
