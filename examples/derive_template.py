"""Write examples/orders/template.yaml from pgkick's own template.yaml.

Why derived, not hand-kept: the example is the template an app copies, and it must
not drift from the one this repository deploys and checks. The differences are the
few an app makes: its own code folder (its tasks and a requirements.txt naming
pgkick), pgkick's handlers from the installed package, its task modules.

    uv run python examples/derive_template.py          # rewrite
    uv run python examples/derive_template.py --check  # exit 1 if stale (the tests run it)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "examples" / "orders" / "template.yaml"
METADATA = """    Metadata:  # infra/Makefile: the locked wheels, precompiled by Python 3.12
      BuildMethod: makefile
      ContextPath: infra
"""
CHANGES = (
    (METADATA, ""),  # an app's build: SAM's own, from app/requirements.txt (no precompile)
    (
        "    CodeUri: functions/\n",
        "    CodeUri: app/  # the app's tasks + requirements.txt naming pgkick\n",
    ),
    (
        '    Default: ""\n    Description: Comma-separated modules (inside functions/)',
        '    Default: "orders_app.tasks"\n    Description: Comma-separated modules (inside app/)',
    ),
    (
        "Description: >\n  pgkick: a Postgres job queue",
        "Description: >\n  orders, a pgkick example app. pgkick: a Postgres job queue",
    ),
)


def derive(text: str) -> str:
    for old, new in CHANGES:
        expected = 2 if old == METADATA else 1  # the worker's and the reaper's
        if text.count(old) != expected:
            raise SystemExit(f"template.yaml changed: {old.strip()!r} is not there {expected}x")
        text = text.replace(old, new)
    return (
        "# Generated from ../../template.yaml by examples/derive_template.py: do not edit.\n" + text
    )


def main(argv: list[str]) -> int:
    text = derive((ROOT / "template.yaml").read_text())
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run python examples/derive_template.py")
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
