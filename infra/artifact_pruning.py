"""What of the artifact nothing imports at run time, removed, and the check that nothing
left imports it (a stage of build_artifact.py, which runs it after the sources are copied).

Why a list of trees, each with its reason, rather than what the handlers import at cold
start: imports happen lazily inside functions too (pgkick imports botocore on first use),
so a tree goes only when nothing left in the artifact names it anywhere, which
dangling_imports() checks on every build; what a kept module imports but can never reach
in Lambda is allowed one by one (ALLOWED_DANGLING), with why.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

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
