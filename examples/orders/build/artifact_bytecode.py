# Copied from ../../../infra/artifact_bytecode.py by examples/derive_template.py: do not edit.
"""The artifact's code precompiled as Lambda's python3.12 imports it, and pgkick's shipped
sources made smaller line for line (a stage of build_artifact.py, after pruning).

Why here and not on Lambda: /var/task is read-only, so a cold start cannot keep what it
compiles, and every cold start would compile again. Unchecked-hash .pyc, because `sam
package` zips every file dated 1980 and a timestamp .pyc would then look stale; the wheels
as sourceless bytecode, and pgkick's docstrings and comments emptied, for the room under
15 MiB (build_artifact.py's docstring says what each costs).
"""

from __future__ import annotations

import ast
import compileall
import importlib.util
import marshal
import os
import py_compile
import subprocess
import sys
import tokenize
from pathlib import Path


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
    .py files ship unchanged); nothing in a handler's path reads pgkick's own __doc__.
    Compiled without column ranges, as the dependencies are (0.03 MiB: a traceback through
    pgkick shows each frame's line, not the carets under the expression that failed), in
    a child Python with PYTHONNODEBUGRANGES set: compile() takes it from its interpreter."""
    if not os.environ.get("PYTHONNODEBUGRANGES"):
        argv = [sys.executable, __file__, "strip_docstrings", str(package)]
        subprocess.run(argv, env={**os.environ, "PYTHONNODEBUGRANGES": "1"}, check=True)
        return
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


def shorten_statements(module: Path) -> None:
    """The generated statements module (pgkick.store.queries, shipped as bytecode alone)
    with each statement's description cut to its name (`-- job_claim: Claims up to ...` to
    `-- job_claim:`) and its whole-line comments dropped: 0.03 MiB of the room under 15 MiB,
    and bytes a statement no longer sends at every call. The name stays first, so the
    server's views (pg_stat_statements, pg_stat_activity) still say which statement ran;
    the descriptions stay in sql/ and in the repository's module, which the tests run. A
    line is a comment only where its first characters are `--`: no runtime statement holds
    a string literal spanning lines (tests/test_artifact.py checks that each shipped
    statement is the repository's less exactly those lines)."""
    tree = ast.parse(module.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            first, _, rest = node.value.partition("\n")
            if first.startswith("-- ") and ": " in first:
                kept = [line for line in rest.split("\n") if not line.lstrip().startswith("--")]
                node.value = "\n".join([first.split(": ", 1)[0] + ":", *kept])
    module.write_text(ast.unparse(tree) + "\n")


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


if __name__ == "__main__":  # strip_docstrings() in a child Python without column ranges
    if sys.argv[1:2] != ["strip_docstrings"] or len(sys.argv) != 3:
        raise SystemExit("usage: artifact_bytecode.py strip_docstrings PACKAGE")
    strip_docstrings(Path(sys.argv[2]))
