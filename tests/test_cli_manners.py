"""The `pgkick` command's rough edges a new user met (issue #27, defect 6): help lines
cut mid-sentence, no --version, arguments without help, a traceback from `schedules
sync` without AWS settings, `limit Q 0` not pointing at --clear, Python reprs in
`status` and a number as a string in its --json, and `invalid choice: 'demo'`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pgkick import cli
from tests.helpers import seed
from tests.store import JobStore


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_line_in_the_help_is_a_whole_sentence() -> None:
    """Catches the list in `pgkick --help` showing each docstring's first line, which
    stops mid-sentence (status: "...; the table's health;")."""
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for choice in sub._choices_actions:
        command = sub.choices[choice.dest]
        doc = " ".join((command.description or "").split())
        assert choice.help and doc.startswith(choice.help), choice.dest
        assert doc[len(choice.help) : len(choice.help) + 1] in ("", "."), (choice.dest, doc)


def test_every_argument_of_every_command_says_what_it_is() -> None:
    """Catches options and positionals (`enqueue TASK`, `--queue`, `limit N`...) that
    `--help` lists without a word."""
    silent = [
        f"{name} {action.dest}"
        for name, command in _commands().items()
        for action in command._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert silent == []


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches `pgkick --version` refused as an unknown argument."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("pgkick 0.1.0")


def test_schedules_sync_without_aws_settings_is_one_line(tmp_path: Path) -> None:
    """Catches `pgkick schedules sync --dry-run` ending in a NoRegionError traceback."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),  # no ~/.aws
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "PGKICK_WORKER_ARN": "arn:aws:lambda:us-east-1:123456789012:function:w",
        "PGKICK_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/s",
        "PGKICK_TASKS": "json",  # a module to read (none: refused before any AWS call)
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "pgkick"), "schedules", "sync", "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "AWS_DEFAULT_REGION" in done.stderr and done.stderr.count("\n") == 1


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("DATABASE_URL", raising=False)


def test_a_limit_of_zero_points_at_clear(
    dsn: str, quiet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick limit mail 0` answering "outside 1..2147483647 (None: no limit)"."""
    assert cli.main(["limit", "mail", "0", "--dsn", dsn]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pgkick limit mail --clear" in err, err


def test_status_prints_values_not_python_reprs(
    dsn: str, quiet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `status` printing dicts (`table: {'n_dead_tup': 0, ...}`) and its --json
    giving oldest_ready_seconds as a string (a Decimal written by str)."""
    with JobStore.open(dsn) as store:
        seed(store, 2, queue="mail")
        store.execute("UPDATE pgkick.jobs SET run_at = now() - %(age)s", age=timedelta(seconds=90))
    assert cli.main(["status", "--dsn", dsn, "--json"]) == 0
    report: Any = json.loads(capsys.readouterr().out)
    (mail,) = report["queues"]
    assert isinstance(mail["oldest_ready_seconds"], int | float)
    assert mail["oldest_ready_seconds"] >= 90
    assert cli.main(["status", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "Decimal" not in out and "datetime" not in out, out
    assert "n_dead_tup:" in out


def test_a_tool_command_without_the_tooling_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick demo` in an app without pgkick-dev answering `invalid choice:
    'demo'` (argparse's usage and error) with no hint."""
    monkeypatch.setattr(sys.modules["pgkick.cli.main"], "entry_points", lambda group: [])
    assert cli.main(["demo", "--jobs", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice" not in err
    assert "pgkick-dev" in err and "docs/getting-started/install.md" in err


@pytest.mark.parametrize("command", [["jobs", "--json"], ["jobs"], ["status", "--json"]])
def test_output_into_a_closed_pipe_ends_quietly(dsn: str, command: list[str]) -> None:
    """Catches `pgkick jobs --json | head -c 300` ending in a BrokenPipeError traceback:
    the reader left, as `head` does, and the command printed on."""
    with JobStore.open(dsn) as store:
        seed(store, 3)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "pgkick"), *command, "--dsn", dsn],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 1 and done.stderr == "", done.stderr


@pytest.mark.parametrize(
    "dsn", ["localhost:5432/shop", "postgresql://app:s3cret@db/shop?nonsense=1"]
)
def test_a_malformed_dsn_is_said_with_the_forms_it_takes(dsn: str) -> None:
    """Catches a DSN libpq cannot parse reported in libpq's words alone (`missing "=" after
    "localhost:5432/shop"`), by the sync and the asyncio connections alike, and with no
    password in the message."""
    from pgkick.connections.aio_db import connect_producer_async
    from pgkick.connections.db import connect
    from pgkick.errors import DatabaseUnavailable

    for opening in (lambda: connect(dsn), lambda: asyncio.run(connect_producer_async(dsn, "t"))):
        with pytest.raises(DatabaseUnavailable) as failure:
            opening()
        said = str(failure.value)
        assert said.startswith("cannot connect to PostgreSQL: malformed DSN: "), said
        assert "postgresql://user:password@host:5432/dbname" in said and "s3cret" not in said


@pytest.mark.parametrize("dsn_flag", [True, False])
def test_a_bad_pgkick_schema_is_one_line_naming_it(
    dsn: str, dsn_flag: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches PGKICK_SCHEMA=Bad ending in a traceback (the error handler read the settings
    again to redact the DSN, and raised), or said as "no database" when DATABASE_URL is set."""
    monkeypatch.setenv("PGKICK_SCHEMA", "Bad")
    monkeypatch.setenv("DATABASE_URL", dsn)
    code = cli.main(["status", *(["--dsn", dsn] if dsn_flag else [])])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("pgkick status: PGKICK_SCHEMA='Bad': expected a lowercase identifier")


@pytest.mark.parametrize(
    "argv",
    [["retry", "--batch", "0"], ["enqueue", "noop", "--wait", "3601"], ["nosuch"], []],
)
def test_the_parsers_refusals_are_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches argparse's usage block (3 to 9 lines) printed before its error, where every
    other refusal of the command is one line (docs/deploy/operations.md)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("pgkick") and err.rstrip().endswith("--help`)"), err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--window", "-1"), ("--duration", "nan"), ("--duration", "-5"), ("--interval", "0")],
)
def test_awake_refuses_a_window_duration_or_interval_out_of_range(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick awake --window -1` (or a NaN duration, a zero interval) accepted:
    a monitor that never suspends, never stops, or looks without pause."""
    with pytest.raises(SystemExit) as exit_info:
        bounded = [] if flag == "--duration" else ["--duration=0.1"]  # never watch forever
        cli.main(["awake", f"{flag}={value}", *bounded, "--dsn", "postgresql://x@127.0.0.1:1/n"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert f"argument {flag}: " in err and "expected over 0" in err, err


def test_building_the_parser_draws_nothing() -> None:
    """Catches every `pgkick` command importing matplotlib (~0.4 s here, 6 s on a loaded
    machine) because pgkick-dev's commands imported the picture writer at module level:
    the parser that every command builds must not pull it in."""
    code = (
        "import sys; from pgkick import cli; cli.build_parser(); print('matplotlib' in sys.modules)"
    )
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert seen.stdout.strip() == "False"


@pytest.mark.parametrize(
    "argv",
    [["status"], ["status", "--dsn"], ["reap", "--dsn"], ["enqueue", "noop", "--wait", "0"]],
)
def test_an_explicit_schema_wins_over_a_bad_pgkick_schema(
    dsn: str, argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches PGKICK_SCHEMA=Bad refusing a command given a valid --schema: the app side's
    settings parsed the variable before the flag replaced it, and the worker's (`reap`, the
    default kicker) never looked at the flag. The flag wins; the variable only matters
    without it (test_a_bad_pgkick_schema_is_one_line_naming_it)."""
    monkeypatch.setenv("PGKICK_SCHEMA", "Bad")
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setattr("pgkick.kick.default._default", None)
    flag = ["--dsn", dsn] if "--dsn" in argv else []  # else DATABASE_URL's
    words = [word for word in argv if word != "--dsn"]
    code = cli.main([*words, *flag, "--schema", "pgkick", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "error" not in json.loads(captured.out)


@pytest.mark.parametrize(
    "argv",
    [
        ["retry", "--all", "--batch", "\uff11\uff10"],  # full-width 10
        ["purge", "--older-than", "\uff17d"],  # full-width 7
        ["limit", "mail", "--rate", "\uff11/s"],
        ["limit", "mail", "--concurrency", "\uff12"],
        ["retry", "--all", "--batch", "1_0"],
        ["jobs", "--limit", "\u0661\u0660"],  # Arabic-Indic 10
    ],
)
def test_only_ascii_digits_are_numbers_in_arguments(
    argv: list[str], dsn: str, quiet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """int(), float() and the regexes' \\d read any Unicode digit (and int() `1_0`), so
    `--batch` in full-width digits ran with 10 where the dashboard refuses the same text
    (note 62's ops review): refused before anything connects, in one line naming it."""
    with pytest.raises(SystemExit) as ended:
        cli.main([*argv, "--dsn", dsn])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert repr(argv[-1]) in err or argv[-1] in err, err
