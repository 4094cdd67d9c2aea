# Copied from ../../../infra/build_artifact.py by examples/derive_template.py: do not edit.
"""Build one function's artifact for `sam build` (BuildMethod: makefile, infra/Makefile).

Why not SAM's own Python builder: it copies the sources and unpacks the wheels but
compiles nothing, so every cold start compiled pgkick, Powertools and psycopg from
source (importing the worker handler: 0.50 s of CPU as SAM built it against 0.28 s
now, README Deploy), and Lambda cannot keep what it compiled: /var/task is read-only. This
does what that builder did (the locked requirements as manylinux wheels for the
function's architecture, then the sources), drops what nothing imports at run time,
and precompiles everything:

- with Python 3.12, the Lambda runtime's: a .pyc carries its interpreter's magic
  number and any other version's is ignored (so a build with another Python fails
  here, rather than shipping bytecode that is silently recompiled at each cold start);
- as unchecked-hash .pyc: a timestamp .pyc is valid only while its source keeps the
  mtime it was compiled against, and `sam package` zips every file with the zip
  format's default date (1980), so on Lambda each timestamp .pyc would look stale
  and be recompiled at every cold start. An unchecked-hash .pyc is used without
  looking at its source, which nothing can change in a deployed artifact;
- the dependencies (the wheels: psycopg, Powertools, jmespath, typing_extensions) as
  sourceless bytecode: module.pyc where module.py was (`compileall -b`), the .py
  deleted, which Python imports as it is. That keeps the arm64 artifact within 15 MiB
  (psycopg-binary's aarch64 libraries carry 3.4 MiB of 64 KiB segment padding that
  only a rewrite of their segment layout would remove). The cost: a traceback through
  a dependency's frame names the file and the line but cannot show the line's text
  (look it up in the same version's source); compiled without column ranges
  (PYTHONNODEBUGRANGES), which would only place carets under that missing text.
  pgkick's own code and the user's modules keep their source and full tracebacks
  (pgkick's sources with their docstrings and comments emptied, line for line: 0.18 MiB
  of the room under 15 MiB, blank_sources() in artifact_bytecode.py).

The architecture is the template's (`Architectures:` in template.yaml, one value for
both functions): SAM does not tell a Makefile the function's architecture, and a build
for the other one than Lambda runs would not load psycopg's binary there. `--architecture`
overrides it (the bench builds this machine's, x86_64, to import it; the tests' `sam build`
gets x86_64 from a copy of the template: tests/sam.py, project_copy()); infra/Makefile
passes PGKICK_ARCHITECTURE as --architecture, for the local build infra/sam_local.py makes
(its own build folder, its built template set to the same architecture).

    python3.12 infra/build_artifact.py SOURCE ARTIFACTS_DIR [--template T] [--architecture A]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

# The build's two later stages sit beside this script, which runs as a script (infra/Makefile:
# `cd infra && python3.12 build_artifact.py`, and the example's copy from its own folder), is
# imported as infra.build_artifact (the tests) and loaded from its file (the bench's
# artifact item): this folder goes on sys.path once, and they are imported by their own
# names in all three (as sam_checks.py imports ops_checks).
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from artifact_bytecode import (  # noqa: E402
    blank_sources,
    compile_sourceless,
    precompile,
    shorten_statements,
    strip_docstrings,
)
from artifact_pruning import dangling_imports, prune  # noqa: E402

# Lambda's python3.12 runtime (template.yaml, Globals: Runtime); tests/test_artifact.py
# checks the two agree.
RUNTIME_VERSION = (3, 12)
# Lambda's python3.12 runs on Amazon Linux 2023, glibc 2.34: a wheel for any glibc up to
# that fits (psycopg-binary's aarch64 wheels need 2.28, more than manylinux2014's 2.17).
# pip wants each tag named; uv takes the newest and admits the older ones.
MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}
GLIBC_MINORS = range(17, 35)
# pgkick's own modules keep their sources (tracebacks show the line), but for generated
# data: its statements are strings, no frame of a traceback is ever in that module.
GENERATED_SOURCES = ("pgkick/store/queries.py",)
TEMPLATE = Path(__file__).resolve().parent.parent / "template.yaml"
ARCHITECTURES = re.compile(r"^\s*Architectures:\s*\[\s*([\w-]+)\s*\]", re.MULTILINE)
# "vendor": an app's folder of wheels to install from (examples/orders), not code to ship.
SKIPPED_SOURCES = ("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", "Makefile", "vendor")


def template_architecture(template: Path) -> str:
    """The one architecture the template gives its functions (`Architectures: [arm64]`,
    a literal: a parameter could be overridden at deploy, after this build)."""
    found = set(ARCHITECTURES.findall(template.read_text()))
    if len(found) != 1 or not found <= set(MACHINES):
        raise SystemExit(
            f"{template}: expected one `Architectures: [x86_64]` or `[arm64]` for every "
            f"function (a literal, not a parameter), found {sorted(found) or 'none'}"
        )
    return found.pop()


def install_requirements(requirements: Path, target: Path, architecture: str) -> None:
    """The wheels `functions/requirements.txt` pins (exported from uv.lock, boto3 left to
    the runtime), for Lambda's platform, not this machine's; `--no-deps`: the file is
    already the whole closure, so nothing unlocked (boto3) comes in through a dependency.
    With pip when this Python or the one its venv was made from has it, else with uv
    (a uv-made venv has no pip; CI may have uv only as `python3 -m uv`)."""
    version = f"{RUNTIME_VERSION[0]}.{RUNTIME_VERSION[1]}"
    machine = MACHINES[architecture]
    common = ["--no-deps", "--only-binary=:all:", "--target", str(target)]
    common += ["--requirement", str(requirements)]
    if (pip := python_with_pip()) is not None:
        argv = [pip, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        argv += ["--root-user-action=ignore", "--no-compile", "--implementation=cp"]
        argv += [f"--platform=manylinux_2_{minor}_{machine}" for minor in GLIBC_MINORS]
        argv += [f"--python-version={version}"]
    elif (uv := shutil.which("uv")) is not None:
        argv = [uv, "pip", "install", "--quiet", "--python", sys.executable]
        argv += [f"--python-platform={machine}-manylinux_2_{GLIBC_MINORS[-1]}"]
        argv += [f"--python-version={version}"]
    else:
        raise SystemExit(f"neither pip (in {sys.executable}) nor uv is at hand to install wheels")
    subprocess.run([*argv, *common], check=True)  # compiled below, once, as Lambda needs it
    (target / ".lock").unlink(missing_ok=True)  # uv's, left in the target folder


def python_with_pip() -> str | None:
    """This Python if it has pip, else its venv's base Python if that one has (any Python
    3 can run pip for another version's --target: --python-version says which)."""
    if importlib.util.find_spec("pip") is not None:
        return sys.executable
    base = getattr(sys, "_base_executable", None)
    if base and base != sys.executable:
        probe = subprocess.run([base, "-m", "pip", "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return str(base)
    return None


def installed_packages(target: Path, source: Path) -> list[str]:
    """The top-level modules and packages the wheels installed into `target` (not their
    metadata, scripts or bundled libraries), less any name the function's own sources
    also have (a source copied over a wheel's module keeps its source)."""
    return sorted(
        entry.name
        for entry in target.iterdir()
        if (entry.suffix == ".py" or (entry.is_dir() and any(entry.rglob("*.py"))))
        and not (source / entry.name).exists()
    )


def copy_sources(source: Path, target: Path) -> None:
    """Everything in the function's CodeUri (pgkick, the handlers, the user's task modules),
    as SAM's builder copied it, without bytecode left by local runs."""
    for entry in source.iterdir():
        if any(entry.match(pattern) for pattern in SKIPPED_SOURCES):
            continue
        if entry.is_dir():
            ignore = shutil.ignore_patterns(*SKIPPED_SOURCES)
            shutil.copytree(entry, target / entry.name, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, target / entry.name)


def assemble(source: Path, target: Path, architecture: str) -> list[str]:
    """The wheels and the sources in `target`, pruned, every import checked, nothing
    compiled yet; returns the wheels' top-level packages (installed_packages())."""
    install_requirements(source / "requirements.txt", target, architecture)
    packages = installed_packages(target, source)
    copy_sources(source, target)
    dangling = dangling_imports(target, prune(target))
    if dangling:
        raise SystemExit(
            "build_artifact.py removed modules that the artifact still imports (keep them: "
            "UNUSED_TREES, or allow one that cannot run in Lambda: ALLOWED_DANGLING, both in "
            "artifact_pruning.py):\n  " + "\n  ".join(dangling)
        )
    return [name for name in packages if (target / name).exists()]  # some prune() removed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the function's CodeUri (SAM's copy of it)")
    parser.add_argument("artifacts", type=Path, help="ARTIFACTS_DIR from sam build")
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--architecture", choices=sorted(MACHINES), help="default: the template's")
    args = parser.parse_args(argv)
    architecture = args.architecture or template_architecture(args.template)
    if sys.version_info[:2] != RUNTIME_VERSION:
        found = f"{sys.version_info[0]}.{sys.version_info[1]}"
        raise SystemExit(
            f"build_artifact.py runs under Python {found}, the Lambda runtime is python3.12: "
            "its bytecode would be ignored there. Put python3.12 on PATH (or make PYTHON=...)."
        )
    args.artifacts.mkdir(parents=True, exist_ok=True)
    packages = assemble(args.source, args.artifacts, architecture)
    generated = [  # pgkick installed as a wheel (an app's build) is a package already
        name
        for name in GENERATED_SOURCES
        if (args.artifacts / name).is_file() and name.split("/")[0] not in packages
    ]
    for name in generated:
        shorten_statements(args.artifacts / name)
    compile_sourceless(args.artifacts, packages + generated)  # after dangling_imports()
    precompile(args.artifacts)
    strip_docstrings(args.artifacts / "pgkick")
    blank_sources(args.artifacts / "pgkick")  # after: the bytecode keeps the full source's lines
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
