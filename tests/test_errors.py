"""Every error pgkick raises on purpose is a PgkickError, and every class of one lives in
pgkick.errors: found by walking the package, not by a list written by hand (a hand-made
list once missed `UniqueKeyChurn`, a bare RuntimeError)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pgkick
from pgkick import errors

RUNTIME = Path(__file__).resolve().parent.parent / "functions" / "pgkick"
BUILT_INS = {"ValueError", "TypeError", "RuntimeError", "Exception", "KeyError", "LookupError"}

# Imports every module of the package (the handlers need a kicker setting to import) and
# lists each exception class defined in it, with whether it derives from PgkickError.
WALK = """
import importlib, inspect, json, pkgutil, pgkick
from pgkick.errors import PgkickError
found = []
for info in pkgutil.walk_packages(pgkick.__path__, "pgkick."):
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
        if inspect.isclass(value) and issubclass(value, BaseException) \\
                and value.__module__ == info.name:
            found.append([info.name, name, issubclass(value, PgkickError)])
print(json.dumps(found))
"""


def test_every_exception_class_is_in_errors_under_the_root() -> None:
    """Catches an exception class defined outside pgkick.errors (an app would have to
    import the module that raises it) or not under PgkickError (`except PgkickError`
    would miss it)."""
    env = {"PGKICK_KICKER": "none", "AWS_DEFAULT_REGION": "eu-west-1", "PATH": "/usr/bin"}
    done = subprocess.run(
        [sys.executable, "-c", WALK], capture_output=True, text=True, env=env, check=True
    )
    found = json.loads(done.stdout)
    assert [row for row in found if row[0] != "pgkick.errors"] == []
    assert [row for row in found if not row[2]] == []
    assert len(found) >= 15  # the walk reached errors.py, not an empty package


def test_no_runtime_module_raises_a_bare_built_in() -> None:
    """Catches `raise ValueError(...)` (or TypeError, RuntimeError, Exception) in the
    runtime: the caller could not tell pgkick's refusal from a bug with `except
    PgkickError`. Re-raising (`raise`) and raising a caught object stay allowed."""
    offenders = []
    for path in sorted(RUNTIME.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in BUILT_INS:
                    offenders.append(f"{path.relative_to(RUNTIME)}:{node.lineno} {func.id}")
    assert offenders == []


def test_bad_input_keeps_its_built_in_base() -> None:
    """Catches an app's existing `except ValueError` / `except TypeError` no longer
    catching pgkick's refusals after they moved under PgkickError."""
    for call, base in (
        (lambda: pgkick.enqueue_and_kick({}, task="", dsn="postgresql://nowhere/x"), ValueError),
        (lambda: pgkick.enqueue_and_kick({}, task=7, dsn="postgresql://nowhere/x"), TypeError),
        (lambda: pgkick.Snooze(0), ValueError),
    ):
        try:
            call()  # type: ignore[no-untyped-call]
        except pgkick.PgkickError as exc:
            assert isinstance(exc, base), type(exc)
        else:
            raise AssertionError("no error raised")
    assert issubclass(errors.InvalidArgument, ValueError)
    assert issubclass(errors.InvalidArgumentType, TypeError)
