"""The `pgkick` command: operations from a shell, each with --help and --json.

Why argparse and one function per command: the commands are thin shells over
the library calls an app or a Lambda makes, so what an operator runs is what
production runs. Errors are one clear line and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pgkick import schema
from pgkick.store import DatabaseUnavailable, JobStore


class UsageError(RuntimeError):
    """A problem with what the operator asked for, said in one line."""


def _dsn(args: argparse.Namespace) -> str:
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    if not dsn:
        raise UsageError("no database: pass --dsn or set DATABASE_URL")
    return str(dsn)


def cmd_migrate(args: argparse.Namespace) -> dict[str, Any]:
    """Apply pgkick's schema migrations (idempotent, safe to run concurrently)."""
    with JobStore.open(_dsn(args)) as store:
        report = schema.migrate(store)
    return {"applied": report.applied, "version": report.version}


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, default=str))
        return
    for key, value in result.items():
        print(f"{key}: {value}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgkick", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler: Callable[[argparse.Namespace], dict[str, Any]]) -> Any:
        sub = commands.add_parser(name, help=(handler.__doc__ or "").splitlines()[0])
        sub.add_argument("--dsn", help="PostgreSQL connection string (default: $DATABASE_URL)")
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        sub.set_defaults(handler=handler)
        return sub

    command("migrate", cmd_migrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _print(args.handler(args), args.json)
    except (UsageError, DatabaseUnavailable, schema.SchemaError) as exc:
        print(f"pgkick {args.command}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
