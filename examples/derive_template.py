"""Write examples/orders/template.yaml from pgkick's own template.yaml, and the example's
build script and requirements from pgkick's (build/: build_artifact.py and the two modules it
imports, app/requirements.txt).

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
    # the app's build folder: build_artifact.py (copied below) behind its own Makefile
    (METADATA, METADATA.replace("infra", "build")),  # ContextPath and its comment
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


SELF = "examples/derive_template.py"
BUILD = ROOT / "examples" / "orders" / "build"
# The build script and the two stages it imports from beside it, copied together.
BUILD_MODULES = ("build_artifact.py", "artifact_pruning.py", "artifact_bytecode.py")
REQUIREMENTS = ROOT / "examples" / "orders" / "app" / "requirements.txt"
REQUIREMENTS_HEAD = """\
# Generated from ../../../functions/requirements.txt by examples/derive_template.py.
# What the build installs beside the app's code, with no dependency resolution
# (build_artifact.py: --no-deps): pgkick and its whole locked closure, less boto3 and
# what only it needs, which Lambda's runtime provides. A real app pins the published
# release (pgkick==0.1.0 from its index) and exports its own lock the same way; this
# example finds the wheel built from the checkout in vendor/ (see README.md).
--find-links vendor
pgkick==0.1.0
"""


def derived_files() -> dict[Path, str]:
    """The example's build script (and its modules) and requirements, from pgkick's own."""
    locked = (ROOT / "functions" / "requirements.txt").read_text().splitlines(keepends=True)
    return {
        **{
            BUILD / name: f"# Copied from ../../../infra/{name} by {SELF}: do not edit.\n"
            + (ROOT / "infra" / name).read_text()
            for name in BUILD_MODULES
        },
        REQUIREMENTS: REQUIREMENTS_HEAD
        + "".join(line for line in locked if not line.lstrip().startswith("#")),
    }


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
    files = {TARGET: derive((ROOT / "template.yaml").read_text()), **derived_files()}
    if "--check" in argv:
        stale = [
            path for path, text in files.items() if not path.exists() or path.read_text() != text
        ]
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python examples/derive_template.py")
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
