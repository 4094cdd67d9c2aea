"""MkDocs hook: the reference pages that are rendered from the code at every build.

Why generated: a hand-kept table of settings or options drifts the day someone adds
one (the README's prose once missed PGKICK_FAILED_KICK_WAKE_MS). The configuration
page is rendered from `pgkick.config.VARIABLES`, the table `Settings.from_env` reads
its defaults and bounds from; the CLI page from `pgkick.cli.main.build_parser()`, the
parser `pgkick` itself runs (with pgkick-dev installed it adds demo, bench and
awake). Neither page exists in docs/: `on_files` adds them to the build, so there is
nothing to edit by hand and nothing to forget to regenerate.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from pgkick.config import VARIABLES, Variable

CONFIGURATION_INTRO = """\
# Configuration

Every environment variable pgkick reads, rendered at build time from
`pgkick.config.VARIABLES`: `Settings.from_env` and the helpers of `pgkick.config`
take their defaults and bounds from that same table, so this page cannot drift from
the code. An empty value counts as unset. A whole number outside its bounds, or not
a whole number, raises `pgkick.ConfigError` naming the variable
(`PGKICK_BATCH=0: expected 1..1000`) before anything is written.

Where each is set: an app that enqueues needs `DATABASE_URL` and the kicker's
settings (`PGKICK_WORKER_FUNCTION`, `PGKICK_SCHEDULER_ROLE_ARN`,
`PGKICK_SCHEDULE_GROUP`); the SAM template sets the functions' own
([Deploy](../deploy/sam.md)); `PGKICK_SCHEMA` must be the same everywhere.

"""

CLI_INTRO = """\
# Command line

Rendered at build time from `pgkick.cli.main.build_parser()`, the parser the `pgkick`
command runs; commands marked *pgkick-dev* are added by the development tooling
(`tools/`, entry point `pgkick.commands`) when it is installed. What each command
does, its exit codes and its output are described in
[Operations](../deploy/operations.md#commands). Every command also takes `-h`/`--help`.

"""


def _cell(text: object) -> str:
    """Text fit for one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(variable: Variable) -> str:
    if variable.default is None:
        return "(none)"
    if isinstance(variable.default, int):
        return f"`{variable.default:_}`".replace("_", ",")
    return f"`{variable.default}`" if variable.default else '`""` (empty)'


def _accepted(variable: Variable) -> str:
    if variable.low is not None and variable.high is not None:
        unit = f" {variable.unit}" if variable.unit else ""
        return f"{variable.low:,}..{variable.high:,}{unit}"
    if variable.choices:
        return ", ".join(f"`{choice}`" for choice in variable.choices)
    return "text"


def render_configuration() -> str:
    """The configuration reference: one row per variable of `pgkick.config.VARIABLES`."""
    rows = [
        "| variable | default | accepted | what it does |",
        "| --- | --- | --- | --- |",
    ]
    for variable in VARIABLES:
        cells = (
            f"`{variable.name}`",
            _default(variable),
            _accepted(variable),
            _cell(variable.description),
        )
        rows.append("| " + " | ".join(cells) + " |")
    return CONFIGURATION_INTRO + "\n".join(rows) + "\n"


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command line, one-line help, parser) for every subcommand, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", helps.get(name, ""), sub
                yield from _commands(sub, f"{prefix} {name}")


def _argument_row(action: argparse.Action) -> str:
    if action.option_strings:
        value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
        name = ", ".join(f"`{option}{value}`" for option in action.option_strings)
    else:
        name = f"`{action.metavar or action.dest}`"
        if action.nargs in ("*", "?"):
            name += " (optional)"
    helped = (action.help or "") % {"default": action.default, "prog": ""}
    details = []
    if action.choices is not None:
        details.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    said = helped.lower()  # what the help already says is not repeated
    if action.default not in (None, False, [], argparse.SUPPRESS) and "default" not in said:
        details.append(f"default `{action.default}`")
    if action.required and action.option_strings:
        details.append("required")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in said:
        details.append("repeatable")
    text = "; ".join(part for part in (helped, *details) if part)
    return f"| {name} | {_cell(text)} |"


def render_cli(parser: argparse.ArgumentParser) -> str:
    """The CLI reference: usage, description and every argument of every command."""
    out = [CLI_INTRO]
    for line, summary, sub in _commands(parser, parser.prog):
        handler = sub.get_default("handler")
        origin = getattr(handler, "__module__", "") or ""
        if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
            continue  # a group of commands: its members have sections of their own
        tooling = " *(pgkick-dev)*" if origin.startswith("pgkick_dev") else ""
        out.append(f"## `{line}`{tooling}\n")
        description = " ".join((sub.description or summary).split())
        if description:  # the handler's docstring: its first line is the summary
            out.append(_cell(description) + "\n")
        out.append(f"```text\n{sub.format_usage().strip()}\n```\n")
        rows = [
            _argument_row(action)
            for action in sub._actions
            if not isinstance(action, argparse._HelpAction)
        ]
        if rows:
            out.append("| argument | what it does |\n| --- | --- |\n" + "\n".join(rows) + "\n")
    return "\n".join(out)


def _cli_page() -> str:
    os.environ.setdefault("COLUMNS", "88")  # usage lines wrap the same on every machine
    from pgkick.cli.main import build_parser

    return render_cli(build_parser())


PAGES: dict[str, Callable[[], str]] = {
    "reference/configuration.md": render_configuration,
    "reference/cli.md": _cli_page,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the build (MkDocs event, before the nav is made)."""
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files
