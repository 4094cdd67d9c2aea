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
  of the room under 15 MiB, blank_sources()).

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
import ast
import compileall
import importlib.util
import marshal
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

# Lambda's python3.12 runtime (template.yaml, Globals: Runtime); tests/test_artifact.py
# checks the two agree.
RUNTIME_VERSION = (3, 12)
# Lambda's python3.12 runs on Amazon Linux 2023, glibc 2.34: a wheel for any glibc up to
# that fits (psycopg-binary's aarch64 wheels need 2.28, more than manylinux2014's 2.17).
# pip wants each tag named; uv takes the newest and admits the older ones.
MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}
GLIBC_MINORS = range(17, 35)
# Never imported in Lambda: type stubs and typing markers (read by type checkers only),
# and the trees below, each with why. dangling_imports() fails the build if anything left
# imports what went (lazy imports inside functions included).
# pip's manifest of what a wheel installed (files and hashes), read by `pip uninstall`
# and importlib.metadata.files() only, and stale once the trees below are pruned; the
# rest of each .dist-info stays (licences; METADATA and entry points, which
# importlib.metadata reads: pgkick looks kickers up by entry point).
UNUSED_AT_RUN_TIME = ("*.pyi", "py.typed", "*.dist-info/RECORD")
UNUSED_TREES = (
    "bin",  # scripts wheels install (jmespath's jp.py): nothing runs them
    # Powertools: pgkick uses Logger, Metrics (EMF) and the LambdaContext type; it reads
    # the database secret itself (pgkick.awsapi.secrets), not through utilities.parameters
    "aws_lambda_powertools/event_handler",  # API Gateway/AppSync routing
    *(
        f"aws_lambda_powertools/utilities/{name}"
        for name in (
            "auth_alpha",
            "batch",
            "circuit_breaker",
            "data_classes",
            "data_masking",
            "feature_flags",
            "idempotency",
            "kafka",
            "metadata",
            "parameters",
            "parser",
            "serialization.py",
            "streaming",
            "validation",
        )
    ),
    "aws_lambda_powertools/metrics/provider/datadog",  # Datadog metrics: pgkick's go by EMF
    "aws_lambda_powertools/logging/formatters",  # the Datadog log formatter, chosen by a user
    "aws_lambda_powertools/middleware_factory",  # decorators for a user's handler
    "aws_lambda_powertools/shared/headers_serializer.py",  # event_handler's (removed)
    "aws_lambda_powertools/shared/cookies.py",  # event_handler's (removed)
    "aws_lambda_powertools/shared/dynamodb_deserializer.py",  # data_classes', idempotency's
    # psycopg: the binary implementation (psycopg_binary) is the one loaded
    "psycopg/pq/pq_ctypes.py",  # ctypes libpq wrapper: needs a system libpq, not in Lambda
    "psycopg/pq/_pq_ctypes.py",  # imported by pq_ctypes only
    "psycopg/pq/_debug.py",  # libpq call tracing, imported by hand when debugging
    "psycopg/_py_transformer.py",  # pure-Python adaptation, used without psycopg_binary only
    "psycopg/crdb",  # CockroachDB connections, imported by an application only
    "psycopg/_dns.py",  # SRV/async DNS resolution: needs dnspython, not in the artifact
    "psycopg/types/hstore.py",  # registered by an application only; pgkick uses jsonb
    "psycopg/types/shapely.py",  # PostGIS adaptation: needs shapely, not in the artifact
    # pgkick: the app side, never reached by a handler; whole subpackages, so a module
    # added to one of them is left out too (tests/test_layout.py: no handler imports them)
    "pgkick/cli",  # the operator's `pgkick` command and its argument types
    "pgkick/store/migration_scripts.py",  # the migrations' scripts: a handler checks versions
    "pgkick/store/inspect.py",  # job pages for `pgkick jobs` and the dashboard
    "pgkick/store/operator.py",  # the CLI's and the dashboard's store
    "pgkick/aws/schedules.py",  # `pgkick schedules sync`, an operator's command
    "pgkick/aws/failures.py",  # its AWS errors in one line
    "pgkick/testing",  # in-process runs and the pytest plugin for an application's tests
    "pgkick/contrib",  # Django and SQLAlchemy producers: need those, not in the artifact
)
# Imports of a removed module that cannot run in Lambda, each with why.
ALLOWED_DANGLING = {
    # in pydantic_to_dict(), called only for a pydantic model: pydantic is in neither
    # the artifact nor Lambda's runtime, so no such model exists there
    ("aws_lambda_powertools/shared/functions.py", "aws_lambda_powertools.event_handler"),
    # psycopg's fallbacks, tried only when psycopg_binary (in the artifact) does not
    # load: they need a system libpq, which Lambda's runtime lacks, so they fail there too
    ("psycopg/pq/__init__.py", "psycopg.pq.pq_ctypes"),
    ("psycopg/_transformer.py", "psycopg._py_transformer"),
    # in _scripts(), called only to migrate (`pgkick migrate`, pgkick.migrate): no handler
    # migrates (a cold worker checks versions); in Lambda it says so as a SchemaError
    ("pgkick/store/migrations.py", "pgkick.store.migration_scripts"),
}
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


def prune(target: Path, trees: tuple[str, ...] = UNUSED_TREES) -> list[str]:
    """Remove files no import reads; returns the removed modules' names."""
    removed = []
    for tree in trees:
        path = target / tree
        if path.suffix == ".py":
            removed.append(module_name(path.relative_to(target)))
            path.unlink(missing_ok=True)
        elif path.is_dir():
            removed += [module_name(p.relative_to(target)) for p in path.rglob("*.py")]
            removed.append(tree.replace("/", "."))
            shutil.rmtree(path)
    for pattern in UNUSED_AT_RUN_TIME:
        for path in target.rglob(pattern):
            path.unlink()
    return removed


def module_name(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, relative: Path) -> set[str]:
    """Every module an import statement in `path` names, at any depth (lazy imports in
    functions included), relative imports resolved."""
    package = module_name(relative).split(".")
    if relative.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def dangling_imports(target: Path, removed: list[str]) -> list[str]:
    """`file: module` for each import left in the artifact of a module prune() removed."""
    gone = set(removed)
    found = []
    for path in sorted(target.rglob("*.py")):
        relative = path.relative_to(target)
        for name in sorted(imported_names(path, relative) & gone):
            allowed = any(
                str(relative) == file and (name == prefix or name.startswith(prefix + "."))
                for file, prefix in ALLOWED_DANGLING
            )
            if not allowed:
                found.append(f"{relative}: {name}")
    return found


def compile_sourceless(target: Path, packages: list[str]) -> None:
    """The installed `packages` as sourceless unchecked-hash bytecode: x.pyc beside where
    x.py was (which Python imports without a source), then each .py deleted. Compiled in
    a Python with no_debug_ranges set (PYTHONNODEBUGRANGES): the column ranges it leaves out only
    place a traceback's carets under a source line, which a sourceless module has none of.
    And at optimisation level 2 (`python -OO`'s code, a mode these libraries support): their
    docstrings, which nothing reads in a Lambda function, and their `assert` statements go
    (0.3 MiB less, the room pgkick's own code grows into under 15 MiB). A sourceless module is
    loaded whatever the interpreter's own level, so Lambda's plain `python` runs this code;
    pgkick's and the user's modules keep their docstrings and asserts (precompile())."""
    if not packages:
        return
    argv = [sys.executable, "-m", "compileall", "-q", "-b", "-o", "2", "-j", "0"]
    argv += ["-s", str(target), "-p", "/var/task", "--invalidation-mode", "unchecked-hash"]
    argv += [str(target / name) for name in packages]
    # the variable, not `-X no_debug_ranges`: compileall's worker processes do not get -X
    env = {**os.environ, "PYTHONNODEBUGRANGES": "1"}
    done = subprocess.run(argv, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"compileall failed for {', '.join(packages)} in {target}")
    for name in packages:
        path = target / name
        for source in path.rglob("*.py") if path.is_dir() else [path]:
            if not source.with_suffix(".pyc").is_file():
                raise SystemExit(f"{source}: no sourceless bytecode beside it")
            source.unlink()


def precompile(target: Path) -> None:
    """Unchecked-hash bytecode for every module left with its source, named as Lambda's
    interpreter looks for it (__pycache__/x.cpython-312.pyc), with /var/task paths in
    tracebacks."""
    ok = compileall.compile_dir(
        target,
        quiet=1,
        workers=0,
        stripdir=str(target),
        prependdir="/var/task",
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    if not ok:
        raise SystemExit(f"compileall failed in {target}")


def documented_bodies(tree: ast.Module) -> list[list[ast.stmt]]:
    """The bodies (module, classes, functions) whose first statement is a docstring."""
    return [
        node.body
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    ]


def strip_docstrings(package: Path) -> None:
    """pgkick's own bytecode without its docstrings (0.13 MiB, the room its code grows into
    under 15 MiB), its asserts kept: each module compiled again from its source, less the
    docstrings of the module, its classes and functions, into the unchecked-hash .pyc that
    precompile() wrote (PEP 552's header: magic, flags 0b01, the source's hash). Every
    other statement keeps its line, so a traceback still shows the source's lines (the
    .py files ship unchanged); nothing in a handler's path reads pgkick's own __doc__."""
    for source in sorted(package.rglob("*.py")):
        text = source.read_bytes()
        tree = ast.parse(text)
        for body in documented_bodies(tree):
            # removed (a `pass` before `from __future__` would not compile), or a `pass`
            # where it was the whole body
            body[:1] = [] if len(body) > 1 else [ast.copy_location(ast.Pass(), body[0])]
        name = "/var/task/" + source.relative_to(package.parent).as_posix()
        code = compile(tree, name, "exec", dont_inherit=True)
        header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")
        pyc = Path(importlib.util.cache_from_source(str(source)))
        pyc.write_bytes(header + importlib.util.source_hash(text) + marshal.dumps(code))


def blank_sources(package: Path) -> None:
    """pgkick's shipped sources with their docstrings and comments emptied, every line kept
    at its number (about a third of their bytes: the room the arm64 artifact needs under 15
    MiB). A traceback reads a frame's line from the .py by its number, and every line of
    code is unchanged where it was, so pgkick's tracebacks still show their source; the
    bytecode was compiled from the full source before (precompile(), strip_docstrings():
    unchecked-hash .pyc, never compared with the file). A docstring becomes an empty string
    spanning the same lines, a comment nothing; the result must parse, line for line."""
    for source in sorted(package.rglob("*.py")):
        text = source.read_bytes().decode("utf-8")  # no newline translation: offsets hold
        docstrings = {
            (body[0].lineno, body[0].col_offset) for body in documented_bodies(ast.parse(text))
        }
        starts = [0]  # each line's offset in `text` (tokenize's rows end at "\n" only)
        for line in text.split("\n"):
            starts.append(starts[-1] + len(line) + 1)
        edits = []  # (start offset, end offset, replacement), in the file's order
        with source.open("rb") as raw:
            for token in tokenize.tokenize(raw.readline):
                (row, col), (end_row, end_col) = token.start, token.end
                if token.type == tokenize.COMMENT:
                    edits.append((starts[row - 1] + col, starts[end_row - 1] + end_col, ""))
                elif token.type == tokenize.STRING and (row, col) in docstrings:
                    empty = '"""' + "\n" * (end_row - row) + '"""' if end_row > row else '""'
                    edits.append((starts[row - 1] + col, starts[end_row - 1] + end_col, empty))
        blanked = text
        for begin, end, replacement in reversed(edits):
            blanked = blanked[:begin] + replacement + blanked[end:]
        if blanked.count("\n") != text.count("\n"):
            raise SystemExit(f"{source}: emptying its docstrings and comments moved its lines")
        ast.parse(blanked, str(source))  # still Python (a reader may run it by hand)
        source.write_bytes(blanked.encode("utf-8"))


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
            "UNUSED_TREES, or allow one that cannot run in Lambda: ALLOWED_DANGLING):\n  "
            + "\n  ".join(dangling)
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
    compile_sourceless(args.artifacts, packages + generated)  # after dangling_imports()
    precompile(args.artifacts)
    strip_docstrings(args.artifacts / "pgkick")
    blank_sources(args.artifacts / "pgkick")  # after: the bytecode keeps the full source's lines
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
