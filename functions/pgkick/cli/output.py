"""How the `pgkick` command talks: help lines, versions, values printed, a failure's one
line (its secrets kept out), missing tooling.

Why apart from pgkick.cli.main: these are the command's manners, not its operations,
and each one was a rough edge a new user met (issue #27): a help line cut
mid-sentence, no --version, Python reprs (`{'n_dead_tup': 0}`, `Decimal('3.2')`)
on the screen, a number sent as a string in --json, and `invalid choice: 'demo'`
where the command exists only once the development tooling is installed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import date, datetime, timedelta
from decimal import Decimal
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pgkick import config
from pgkick.connections.redact import redact
from pgkick.errors import JobFailed, JobRetried, PgkickError

# Commands the development tooling (pgkick-dev) adds through the `pgkick.commands` entry point.
TOOL_COMMANDS = ("demo", "bench", "awake")
INSTALL_PAGE = "docs/getting-started/install.md"


def summary(doc: str | None) -> str:
    """The first sentence of a command's docstring, whole, for the list in `pgkick --help`
    (the first line of a wrapped docstring stops mid-sentence)."""
    flat = " ".join((doc or "").split())
    first = re.split(r"(?<=\.)\s", flat, maxsplit=1)[0]
    return first.removesuffix(".")


def versions() -> str:
    """`pgkick X` and, when installed, `pgkick-dev Y`: what a bug report needs."""
    found = []
    for name in ("pgkick", "pgkick-dev"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            if name == "pgkick":
                found.append("pgkick (not installed as a distribution)")
    return ", ".join(found)


def json_value(value: object) -> object:
    """What json.dumps cannot write itself, as a reader of --json wants it: numbers as
    numbers (PostgreSQL's numeric arrives as Decimal), instants as ISO 8601, spans as
    seconds."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


def failure(exc: BaseException, message: str) -> dict[str, Any]:
    """What `--json` prints when the command fails (its line goes to stderr too): the
    error, and the job it names when it names one (`pgkick enqueue --wait` of a job that
    failed: the id it enqueued, and whether a retry is booked)."""
    document: dict[str, Any] = {"error": message}
    if isinstance(exc, JobFailed):
        retried = isinstance(exc, JobRetried)
        document |= {"id": exc.job_id, "status": "queued" if retried else "failed"}
    return document


def text(value: object) -> str:
    """One value for the human-readable output: no Python reprs."""
    if value is None:
        return "-"
    if isinstance(value, Decimal | float):
        return f"{float(value):.1f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(text(v) for v in value) or "none"
    return str(json_value(value)) if not isinstance(value, str | int) else str(value)


def tooling_missing(parser: argparse.ArgumentParser, argv: list[str] | Any) -> str | None:
    """The one-line answer to `pgkick demo` (bench, awake) where pgkick-dev is not installed,
    instead of argparse's `invalid choice`; None when the command exists or is another."""
    words = [word for word in argv if not word.startswith("-")]
    if not words or words[0] not in TOOL_COMMANDS:
        return None
    commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if commands is not None and words[0] in commands.choices:
        return None
    return (
        f"pgkick {words[0]}: comes with the development tooling, which is not installed here: "
        f"install the pgkick-dev wheel (see {INSTALL_PAGE}), or run `uv run pgkick "
        f"{words[0]}` in a clone of pgkick's repository"
    )


def print_result(result: dict[str, Any], as_json: bool) -> None:
    """A command's result: one JSON document with --json, else a line a key (a list of
    rows or a mapping indented under its key), values as `text` shows them."""
    if as_json:
        print(json.dumps(result, default=json_value))
        return
    for key, value in result.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            print(f"{key}:")
            for row in value:
                print("  " + "  ".join(f"{k}={text(v)}" for k, v in row.items()))
        elif isinstance(value, dict):
            print(f"{key}:" + ("" if value else " none"))
            for k, v in value.items():
                print(f"  {k}: {text(v)}")
        else:
            print(f"{key}: {text(value)}")


def _secrets(args: argparse.Namespace) -> list[str | None]:
    """The DSNs an error message must not show: --dsn and the settings'. The settings may
    be what failed (a bad PGKICK_SCHEMA, raised again here): then their error names that
    setting, never DATABASE_URL (which they keep unparsed), and --dsn is all there is."""
    try:
        return [args.dsn, config.app_settings().database_url]
    except (PgkickError, ValueError):
        return [args.dsn]


INTERRUPTED = (
    "interrupted (Ctrl-C): the transaction under way was rolled back, nothing of it written"
)
INTERRUPTED_EXIT = 130  # a shell's code for a command stopped by SIGINT (128 + 2)


def failed(args: argparse.Namespace, exc: BaseException, code: int) -> int:
    """The one line on stderr (and the JSON document with --json) of a failed command."""
    from pgkick.awsapi.signature import without_session_token  # (an error path only)

    message = redact(" ".join(without_session_token(str(exc)).split()), _secrets(args))
    print(f"pgkick {args.command}: {message}", file=sys.stderr)
    if args.json:  # one JSON document on stdout, a failure too
        print(json.dumps(failure(exc, message)))
    return code
