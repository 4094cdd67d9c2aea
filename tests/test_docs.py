"""The documentation cannot drift from the code: the configuration table lists every
variable the runtime reads (and nothing else), the code takes its defaults and bounds
from that table, the generated reference pages cover every variable, command and
option, the README stays a short front page whose commands CI runs, the API reference has
an entry for every public name, and the guide's Python blocks run against the code."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from pgkick import config
from pgkick.cli import build_parser
from pgkick.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "functions"
NAMED = re.compile(r"\bPGKICK_[A-Z0-9_]+")
# os.environ.get("X"), env.get("X"), os.environ["X"], env["X"]: any variable read by name.
READ = re.compile(r"""\b(?:environ|env)(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]*)["']""")
TABLE = {variable.name: variable for variable in config.VARIABLES}
BOUNDED = [v for v in config.VARIABLES if v.low is not None]


def _hook() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "reference.py"
    spec = importlib.util.spec_from_file_location("docs_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runtime_sources() -> Iterator[str]:
    paths = sorted(RUNTIME.rglob("*.py"))
    assert len(paths) > 20  # the walk saw the runtime, wherever its modules moved to
    for path in paths:
        if path.name != "queries.py":  # generated from sql/, holds no variable
            yield path.read_text()


class Recorder(Mapping[str, str]):
    """An environment that remembers every name looked up in it."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values, self.seen = dict(values), set[str]()

    def __getitem__(self, name: str) -> str:
        self.seen.add(name)
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        self.seen.add(name)
        return self.values.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


READERS: list[Callable[[Mapping[str, str]], object]] = [
    config.Settings.from_env,
    config.producer_linger,
    config.failed_kick_wake,
    config.kick_pending,
    config.schema_name,
]


def _read_all(env: Mapping[str, str]) -> list[object]:
    """What every reader of pgkick.config makes of `env` (a ConfigError as its message)."""
    answers: list[object] = []
    for reader in (*READERS, config.database_url):
        try:
            answers.append(reader(env))
        except ConfigError as exc:
            answers.append(("ConfigError", str(exc)))
    return answers


def test_every_variable_the_runtime_names_is_in_the_table() -> None:
    """Catches a PGKICK_ variable (or any variable read by name) added to the runtime
    without its row in config.VARIABLES: the configuration page would not list it."""
    named: set[str] = set()
    for text in _runtime_sources():
        named |= set(NAMED.findall(text)) | set(READ.findall(text))
    assert sorted(named - TABLE.keys()) == []
    assert sorted(n for n in TABLE if n.startswith("PGKICK_") and n not in named) == []


def test_every_variable_in_the_table_is_read() -> None:
    """Catches a row for a variable nothing reads (a page promising a setting that does
    nothing) and a reader looking up a name the table lacks: pgkick.config's readers
    are run against an environment that records each lookup; the handlers' Powertools
    names are read by name in pgkick.aws."""
    env = Recorder({})
    _read_all(env)  # database_url ends in a ConfigError: neither variable is set
    by_name = {name for text in _runtime_sources() for name in READ.findall(text)}
    assert sorted(env.seen - TABLE.keys()) == []
    assert sorted(TABLE.keys() - env.seen - by_name) == []


@pytest.mark.parametrize("variable", BOUNDED, ids=lambda v: v.name)
def test_defaults_and_bounds_come_from_the_table(variable: config.Variable) -> None:
    """Catches a reader whose default or bounds differ from the table's (a hard-coded
    number beside the row): unset and set to the table's default read the same, the
    table's bounds are accepted, one past each is refused with the usual message."""
    assert variable.low is not None and variable.high is not None
    assert _read_all({}) == _read_all({variable.name: str(variable.default)})
    for inside in (variable.low, variable.high):
        assert not any(
            isinstance(a, tuple) and a[0] == "ConfigError" and variable.name in a[1]
            for a in _read_all({variable.name: str(inside)})
        )
    for outside in (variable.low - 1, variable.high + 1):
        message = f"{variable.name}={outside}: expected {variable.low}..{variable.high}"
        assert ("ConfigError", message) in _read_all({variable.name: str(outside)})


def test_configuration_page_has_a_row_per_variable() -> None:
    """Catches the rendered configuration reference leaving a variable out."""
    page = _hook().render_configuration()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [v.name for v in config.VARIABLES]
    assert "| `PGKICK_FAILED_KICK_WAKE_MS` | `0` | 0..3,600,000 ms |" in page


def test_cli_page_has_every_command_and_option() -> None:
    """Catches the rendered CLI reference missing a command (the tooling's included) or
    any option or argument of one, each looked for in its own command's section."""
    hook = _hook()
    page = hook.render_cli(build_parser())
    sections = dict(re.findall(r"^## `([^`]+)`[^\n]*\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    commands = {line: sub for line, _, sub in hook._commands(build_parser(), "pgkick")}
    assert {"pgkick migrate", "pgkick demo", "pgkick bench", "pgkick awake"} <= commands.keys()
    for line, sub in commands.items():
        assert line in sections, line
        for action in sub._actions:
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                if name not in ("-h", "--help"):
                    assert f"`{name}" in sections[line], (line, name)


def test_nav_pages_exist() -> None:
    """Catches a nav entry whose page is neither in docs/ nor generated by the hook."""
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(entries: list[Any]) -> Iterator[str]:
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                yield from pages(value) if isinstance(value, list) else [value]

    listed = list(pages(site["nav"]))
    missing = [p for p in listed if not (ROOT / "docs" / p).exists() and p not in _hook().PAGES]
    assert missing == []
    assert len(listed) > 25
    nav = listed
    assert nav.index("develop/local.md") < nav.index("deploy/sam.md")


def test_readme_is_a_front_page_whose_commands_ci_runs() -> None:
    """Catches the README growing back into a manual, losing its quickstart, linking
    to a file that does not exist, or CI no longer running the commands it shows."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    quickstart = ["uv run pgkick demo", "uv run pytest"]
    shown = [line.split("#")[0].strip() for line in readme.splitlines()]
    assert all(command in shown for command in quickstart)
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert [line for line in ci if line in quickstart] == quickstart
    links = re.findall(r"\]\((?!https?://|#)([^)#]+)", readme)
    assert links and [link for link in links if not (ROOT / link).exists()] == []
    assert "shared/seed" not in readme


def test_letting_the_app_kick_names_every_variable_the_stack_outputs_for_the_app() -> None:
    """Catches docs/deploy/sam.md's "Letting the app kick" leaving out a variable a stack
    output is there to give the app (review 60, F3: PGKICK_SCHEDULE_DLQ_ARN, without
    which the app's wake-ups have no dead-letter queue and Scheduler drops those it
    cannot deliver)."""
    outputs = (ROOT / "template.yaml").read_text().split("\nOutputs:\n", 1)[1]
    for_app = [line for line in outputs.splitlines() if "for the app" in line]
    wanted = {name for line in for_app for name in NAMED.findall(line)}
    assert {"PGKICK_WORKER_FUNCTION", "PGKICK_SCHEDULE_DLQ_ARN"} <= wanted
    page = (ROOT / "docs" / "deploy" / "sam.md").read_text()
    section = page.split("## Letting the app kick\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(name for name in wanted if f"`{name}`" not in section) == []


def test_api_reference_has_an_entry_for_every_public_name() -> None:
    """Catches a public name the generated API reference leaves out: mkdocstrings is told
    `show_if_no_docstring: false`, so a name bound by assignment (`task = registry.task`)
    without a docstring griffe can see was silently absent, `pgkick.task` among them (review
    61, F2). Each `::: module` page of docs/reference/api is loaded as mkdocstrings loads it,
    and every name of that module's `__all__` must carry a docstring."""
    import importlib

    import griffe

    pages = sorted((ROOT / "docs" / "reference" / "api").glob("*.md"))
    modules = [m for p in pages for m in re.findall(r"^::: ([\w.]+)", p.read_text(), re.M)]
    assert {"pgkick", "pgkick.testing", "pgkick.aio"} <= set(modules)
    undocumented = []
    for module in modules:
        public = getattr(importlib.import_module(module), "__all__", None)
        if public is None:
            continue
        loaded = griffe.load(module, search_paths=[str(RUNTIME)])
        for name in public:
            member = loaded[name]
            if not (member.final_target if member.is_alias else member).docstring:
                undocumented.append(f"{module}.{name}")
    assert undocumented == []


# The guide's Python blocks, run as a reader runs them (review 61, F5): each in a fresh
# interpreter (a page's tasks register once), on a migrated database of its own, with the
# reader's own objects the pages take as given (`conn`, `mailer`, a row to insert...)
# defined first. A block that names an API pgkick does not have (a renamed function, a
# dropped option, a wrong import) fails here. Left out, each with why:
SNIPPET_PAGES = [
    "README.md",
    *sorted(f"docs/guide/{p.name}" for p in (ROOT / "docs/guide").glob("*.md")),
]
NOT_RUN = {
    # a pytest module of the reader's app: tests/test_fresh_app.py runs it in a fresh venv
    ("docs/guide/testing.md", "# tests/test_checkout.py"): "needs the reader's app, myapp",
}
CUT_AT = {  # the rest of the block needs a framework's own set-up (settings, models)
    ("docs/guide/enqueue.md", "# psycopg, pgkick owns the transaction"): "# Django",
    ("docs/guide/dependencies.md", "import pgkick"): "run = await wf.enqueue_async()",
}
INLINE = {"docs/guide/cancel-snooze-results.md"}  # pgkick.wait needs the job run: inline mode
READER = """
import asyncio, os
import psycopg
import pgkick
from pgkick import testing

dsn = os.environ["DATABASE_URL"]
conn = psycopg.connect(dsn)
conn.execute("CREATE TABLE orders (id int)")
conn.commit()


class _Anything:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None


mailer = _Anything()
rev, url, payload, tenant_id = 1, "https://example.com/hook", {}, "t1"
receipts = [{"order": 1, "email": "a@example.com"}]
upstream_ready, chunks, process = (lambda: True), (lambda p: [1, 2]), (lambda c: None)


@pgkick.task("virus_scan")
def virus_scan(image: dict) -> None: ...


"""


def _snippets() -> Iterator[Any]:
    for page in SNIPPET_PAGES:
        text = (ROOT / page).read_text()
        previous = ""
        for found in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M):
            block = textwrap.dedent(found.group(2))
            first = block.splitlines()[0]
            line = text[: found.start()].count("\n") + 1
            # a block that imports nothing and uses what the one before defined continues it
            code = block if re.search(r"^(import|from) ", block, re.M) else previous + block
            previous = code
            cut = next((c for (p, f), c in CUT_AT.items() if p == page and first.startswith(f)), "")
            code = code.split(cut)[0] if cut else code
            if (page, first) not in NOT_RUN:  # (run elsewhere: not a skip counted as a pass)
                yield pytest.param(page, code, id=f"{page}:{line}")


@pytest.mark.parametrize(("page", "code"), list(_snippets()))
def test_the_guides_python_blocks_run(page: str, code: str, dsn: str, tmp_path: Path) -> None:
    """Catches a guide page whose code no longer runs against the code: a function or option
    renamed, an import that moved, a block relying on a name no page defines."""
    if 'task("send_receipt")' not in code:  # the handle the enqueue pages take as given
        code = '@pgkick.task("send_receipt")\ndef send_receipt(receipt: dict) -> None: ...\n' + code
    if "await " in code:
        code = "async def main():\n" + textwrap.indent(code, "    ") + "\nasyncio.run(main())\n"
    if page in INLINE:
        code = "with testing.inline(dsn):\n" + textwrap.indent(code, "    ")
    script = tmp_path / "snippet.py"
    script.write_text(
        READER
        + code.replace('"INSERT INTO orders ..."', '"INSERT INTO orders VALUES (1)"')
        .replace("{...}", "{}")
        .replace(", ...}", "}")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGKICK_")}
    env.update(DATABASE_URL=dsn, PGKICK_KICKER="none")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
