"""Generate the query modules from the statements in sql/.

Why: SAM packages only functions/, yet sql/ is where every statement lives and
is reviewed. The generated modules carry the same text as Python constants
(typed as literal strings, which psycopg and mypy accept as safe queries), and
`--check` (run by the test suite) fails when they have drifted:

- sql/*.sql and sql/migrations/ -> functions/pgkick/store/queries.py (the runtime's, shipped);
- tools/sql/*.sql -> tools/pgkick_dev/queries.py (the benchmark's and the demo's, never
  shipped to Lambda).

    python tools/bundle_sql.py          # rewrite both
    python tools/bundle_sql.py --check  # exit 1 if either is stale
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = ROOT / "sql"
TARGET = ROOT / "functions" / "pgkick" / "store" / "queries.py"
SCRIPTS_TARGET = ROOT / "functions" / "pgkick" / "store" / "migration_scripts.py"
DEV_TARGET = ROOT / "tools" / "pgkick_dev" / "queries.py"
DEV_SQL_DIR = ROOT / "tools" / "sql"  # the tooling's statements: never shipped
NAME = re.compile(r"^[a-z]+(_[a-z]+)+$")
MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def _summary(path: Path, text: str) -> str:
    """The first line must be `-- <name>: <what it does>`; return the description."""
    first = text.splitlines()[0] if text else ""
    prefix = f"-- {path.stem}: "
    if not first.startswith(prefix) or len(first) == len(prefix):
        raise SystemExit(f"{path}: first line must be '{prefix}<what it does>'")
    return first[len(prefix) :]


def _literal(text: str) -> str:
    """A readable triple-quoted literal; repr() when the text could not survive one."""
    text = text.strip()
    if '"""' in text or "\\" in text or text.endswith('"'):
        return repr(text)
    return f'"""\\\n{text}"""'


def render(sql_dir: Path = SQL_DIR) -> str:
    """Build the text of the runtime's queries.py from sql_dir's statements and migrations."""
    lines = [
        '"""Every SQL statement pgkick runs: generated from sql/ by tools/bundle_sql.py.',
        "",
        "Do not edit: change sql/ and regenerate. Each constant is the named file's text,",
        "whose first line says what it does.",
        '"""',
        "",
        "from typing import Final, LiteralString",
        "",
    ]
    lines += _statements(sorted(sql_dir.glob("*.sql")))
    versions = ", ".join(str(int(MIGRATION.match(p.name)[1])) for p in _migrations(sql_dir))  # type: ignore[index]
    lines += [
        "# The migrations' versions in the order they apply (their scripts:",
        "# pgkick.store.migration_scripts, which a Lambda handler never loads).",
        f"MIGRATION_VERSIONS: Final[tuple[int, ...]] = ({versions},)",
        "",
    ]
    return "\n".join(lines)


def _migrations(sql_dir: Path) -> list[Path]:
    paths = sorted((sql_dir / "migrations").glob("*.sql"))
    for path in paths:
        if not MIGRATION.match(path.name):
            raise SystemExit(f"{path}: migrations are named NNNN_name.sql")
        _summary(path, path.read_text())
    return paths


def render_migrations(sql_dir: Path = SQL_DIR) -> str:
    """Build the text of the runtime's migration_scripts.py from sql_dir/migrations."""
    lines = [
        '"""Every migration script: generated from sql/migrations/ by tools/bundle_sql.py.',
        "",
        "Do not edit: change sql/ and regenerate. Apart from pgkick.store.queries because only",
        "a migrator (`pgkick migrate`, pgkick.migrate) reads them: the Lambda artifact leaves",
        "them out, and a handler checks versions only (queries.MIGRATION_VERSIONS).",
        '"""',
        "",
        "from typing import Final, LiteralString",
        "",
        "# (version, name, script) in the order they apply.",
        "MIGRATIONS: Final[tuple[tuple[int, str, LiteralString], ...]] = (",
    ]
    for path in _migrations(sql_dir):
        match = MIGRATION.match(path.name)
        assert match is not None
        lines.append(f"    ({int(match[1])}, {match[2]!r}, {_literal(path.read_text())}),")
    return "\n".join([*lines, ")", ""])


def render_dev(sql_dir: Path = DEV_SQL_DIR) -> str:
    """Build the text of the tooling's queries.py from sql_dir (tools/sql)."""
    lines = [
        '"""The statements only the benchmark, the demo and the awake comparison run:',
        "generated from tools/sql/ by tools/bundle_sql.py. Never shipped to Lambda.",
        '"""',
        "",
        "from typing import Final",
        "",
    ]
    return "\n".join(lines + _statements(sorted(sql_dir.glob("*.sql"))))


def _statements(paths: list[Path]) -> list[str]:
    lines = []
    for path in paths:
        if not NAME.match(path.stem):
            raise SystemExit(f"{path}: statement names are entity_first snake case")
        text = path.read_text()
        _summary(path, text)
        lines += [f"{path.stem.upper()}: Final = {_literal(text)}", ""]
    return lines


def main(argv: list[str]) -> int:
    stale = []
    targets = (
        (TARGET, render()),
        (SCRIPTS_TARGET, render_migrations()),
        (DEV_TARGET, render_dev()),
    )
    for target, text in targets:
        if "--check" not in argv:
            target.write_text(text)
        elif not target.exists() or target.read_text() != text:
            stale.append(str(target.relative_to(ROOT)))
    if stale:
        print(f"{', '.join(stale)} stale: run python tools/bundle_sql.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
