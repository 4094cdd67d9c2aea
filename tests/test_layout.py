"""The layout holds: the runtime never imports the tooling, and a production process
loads only what it needs (no demo tasks, no surprise worker processes)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import pgkick
from pgkick import config
from pgkick.kick.default import make_kicker
from pgkick.producer import enqueue as producer

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "functions" / "pgkick"
TOOLING = ("pgkick_dev", "tests", "infra", "embedded", "matplotlib", "postgresql")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_runtime_modules_never_import_the_tooling() -> None:
    """Catches a runtime module (shipped to Lambda and into apps) importing pgkick_dev, the
    tests or infra, even inside a function: the wheel without pgkick-dev would then break."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imports(path) if name.split(".")[0] in TOOLING
        )
        for path in sorted(RUNTIME.rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}
    assert len(offenders) > 20  # the walk saw the package, not an empty folder


# The runtime's units from the bottom up: a unit imports only units below it (or itself).
# The public faces (pgkick, aio, testing) and the adapters (aws, cli, contrib) sit on top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("variables",),
    ("awsapi",),  # AWS calls signed without boto3: the secret (config), rescues (kick)
    ("config",),
    ("validation",),
    ("connections",),
    ("store",),
    ("kick",),
    ("producer",),
    ("aio",),  # the asyncio producer: the typed handle's async forms call it
    ("tasks",),
    ("worker",),
    ("aws", "contrib"),
    ("cli", "pgkick"),
    ("testing",),  # the test kit drives the public face, as an app's tests do
)


def _unit(path: Path) -> str:
    parts = path.relative_to(RUNTIME).with_suffix("").parts
    return "pgkick" if parts == ("__init__",) else parts[0]


def _units_imported(path: Path) -> set[str]:
    """The runtime units a module imports, at the top or inside a function alike."""
    units = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
            if node.module == "pgkick":  # a submodule by name, or a name of the package's face
                names = [
                    f"pgkick.{alias.name}"
                    if (RUNTIME / f"{alias.name}.py").exists() or (RUNTIME / alias.name).is_dir()
                    else "pgkick"
                    for alias in node.names
                ]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        units |= {n.split(".")[1] for n in names if n.startswith("pgkick.")}
        units |= {"pgkick" for n in names if n == "pgkick"}
    return units


def test_subpackages_import_only_downwards() -> None:
    """Catches an import running back up the layers (the store importing the producer, the
    worker importing the CLI or the AWS adapters, anything importing the contrib): the
    architecture the folders show would then be a lie, and a cycle one edit away."""
    level = {unit: i for i, units in enumerate(LAYERS) for unit in units}
    upward = []
    for path in sorted(RUNTIME.rglob("*.py")):
        me = _unit(path)
        for other in _units_imported(path) - {me}:
            if level[other] >= level[me]:
                upward.append(f"{path.relative_to(RUNTIME)} ({me}) imports {other}")
    assert upward == []
    assert set(level) == {_unit(p) for p in RUNTIME.rglob("*.py")}  # every unit placed


def test_import_pgkick_loads_the_producer_only() -> None:
    """Catches `import pgkick` pulling in the worker loop, leases, reaper, schema, the
    worker's or the operators' statements, or the tooling (an app's web process pays for
    each at start-up), and the handlers loading the tooling or OpenTelemetry (installed
    here, as pgkick[otel]: pgkick uses it only once the app loaded it), in a fresh
    interpreter."""
    code = (
        "import sys, json, pgkick; pgkick.enqueue_and_kick; light = sorted(sys.modules);"
        "import pgkick.aws.worker, pgkick.aws.reaper;"
        "print(json.dumps([light, sorted(sys.modules)]))"
    )
    env = {"PGKICK_WORKER_FUNCTION": "pgkick-worker", "AWS_DEFAULT_REGION": "eu-west-1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    light, handlers = json.loads(done.stdout)
    loaded = {name for name in light if name.startswith("pgkick")}
    assert not loaded & {
        "pgkick.worker.loop",
        "pgkick.worker.lease",
        "pgkick.worker.reaper",
        "pgkick.store.migrations",
        "pgkick.store.worker",
        "pgkick.store.maintenance",
    }
    assert {"pgkick.producer.enqueue", "pgkick.store.producer"} <= loaded
    assert not [name for name in handlers if name.split(".")[0] in TOOLING]
    assert not [name for name in handlers if name.startswith("opentelemetry")]


def test_the_worker_lambda_cold_start_skips_the_parts_it_does_not_use() -> None:
    """Catches `import pgkick.aws.worker` (a kick's cold start, issue 32's cold path) loading
    what its drain never uses: pgkick's face names (asyncio, workflows, joined enqueues),
    the producer (imported at a task's first spawn or result lookup), the reaper's modules,
    schedules (imported at a tick).
    Each is a few milliseconds of a new environment's commit-to-claim. And `import pgkick`
    alone loads none of its parts: they load on first use of a name."""
    code = (
        "import sys, json, pgkick; bare = sorted(sys.modules);"
        "import pgkick.aws.worker; print(json.dumps([bare, sorted(sys.modules)]))"
    )
    env = {"PGKICK_WORKER_FUNCTION": "pgkick-worker", "AWS_DEFAULT_REGION": "eu-west-1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    bare, worker = json.loads(done.stdout)
    assert [name for name in bare if name.startswith("pgkick.")] == []
    assert not set(worker) & {
        "pgkick.aio",
        "pgkick.connections.aio_pool",
        "pgkick.tasks.workflow",
        "pgkick.producer.joined",
        "pgkick.producer.enqueue",
        "pgkick.producer.group_commit",
        "pgkick.store.producer",
        "pgkick.store.maintenance",
        "pgkick.worker.reaper",
        "pgkick.tasks.recurring",
    }
    assert {"pgkick.worker.loop", "pgkick.store.worker", "pgkick.tasks.registry"} <= set(worker)


def _records(tree: ast.Module) -> list[str]:
    """The NamedTuple and TypedDict classes a module defines (direct subclasses, and
    subclasses of those defined before them in the module)."""
    records: set[str] = {"NamedTuple", "TypedDict"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            if bases & records:
                records.add(node.name)
                found.append(node.name)
    return found


def test_records_evaluate_their_annotations() -> None:
    """Catches a runtime module that defines a NamedTuple or a TypedDict under
    `from __future__ import annotations`. Python 3.12's typing compiles every string
    annotation of such a class when the class is made (a ForwardRef each, about 12 us a
    field here); the records on the worker's import took 4.7 ms of every cold start that
    way, about 3 ms with their annotations evaluated (docs/performance.md, "Records evaluate
    their annotations"). A name that only exists later, or only for the type checker,
    stays quoted in such a module: the one annotation compiled, not the class's."""
    postponed = []
    for path in sorted(RUNTIME.rglob("*.py")):
        tree = ast.parse(path.read_text())
        future = any(
            isinstance(node, ast.ImportFrom)
            and node.module == "__future__"
            and any(alias.name == "annotations" for alias in node.names)
            for node in tree.body
        )
        if future and (records := _records(tree)):
            postponed.append(f"{path.relative_to(RUNTIME)}: {', '.join(records)}")
    assert postponed == []
    assert _records(ast.parse((RUNTIME / "config" / "__init__.py").read_text())) == ["Settings"]


def test_the_lazy_face_gives_every_name_it_lists() -> None:
    """Each name of `pgkick.__all__` resolves (a typo in the lazy face's table would only
    fail at an app's first use), `from pgkick import ...` works, and an unknown name is an
    AttributeError as for any module."""
    import pgkick

    for name in pgkick.__all__:
        assert getattr(pgkick, name) is not None, name
    from pgkick import Workflow, enqueue_and_kick, task

    assert Workflow.__module__ == "pgkick.tasks.workflow"
    assert callable(enqueue_and_kick) and callable(task)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        pgkick.nothing_here  # noqa: B018


def test_production_registry_knows_noop_only() -> None:
    """Catches demo or test tasks (`crash` kills its worker) registered in production: a
    fresh worker process with no PGKICK_TASKS, after building the CLI parser too."""
    code = (
        "from pgkick.tasks.registry import registry; from pgkick.cli.main import build_parser;"
        "build_parser(); print(','.join(registry.names()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={}, check=True
    )
    assert done.stdout.strip() == "noop"


def test_nothing_configured_refuses_before_writing(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches the old default (a local kicker spawning processes inside a web server that
    forgot PGKICK_WORKER_FUNCTION) and an error raised only after the job was committed."""
    for name in ("PGKICK_KICKER", "PGKICK_WORKER_FUNCTION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pgkick.kick.default._default", None)
    with pytest.raises(pgkick.ConfigError, match=r"PGKICK_WORKER_FUNCTION.*PGKICK_KICKER=local"):
        pgkick.enqueue_and_kick({}, task="noop", dsn=dsn)
    with psycopg.connect(dsn) as conn:
        with pytest.raises(pgkick.PgkickError, match="no kicker configured"):
            with producer.transaction(conn) as jobs:
                jobs.enqueue({}, task="noop")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgkick.jobs").fetchone() == (0,)


def test_an_unknown_kicker_names_what_to_install() -> None:
    """Catches a kicker name that no installed plugin provides failing obscurely (or only
    at the first kick, after a commit)."""
    with pytest.raises(config.ConfigError, match="PGKICK_KICKER"):
        config.Settings.from_env({"PGKICK_KICKER": "carrier-pigeon"})
    settings = config.Settings.from_env({"PGKICK_KICKER": "local"})
    # pgkick-dev installed here: its client is found by entry point, and with no stack
    # answering (and none to be started) it refuses before anything is written
    nobody = {"PGKICK_DEV_URL": "http://127.0.0.1:9", "PGKICK_DEV_AUTOSTART": "0"}
    with pytest.raises(config.ConfigError, match="no `pgkick dev` answers at"):
        make_kicker(settings, nobody)


def test_every_tooling_error_has_one_root() -> None:
    """Catches an error class of the tooling that `except PgkickError` misses (the
    runtime's own are found by walking the package: tests/test_errors.py)."""
    from pgkick_dev.embedded import EmbeddedPostgresError
    from pgkick_dev.scratch import NotScratch

    for cls in (EmbeddedPostgresError, NotScratch):
        assert issubclass(cls, pgkick.PgkickError), cls
