"""The artifact `sam build` makes (infra/Makefile, infra/build_artifact.py): bytecode that
Lambda's Python 3.12 uses as it is (the dependencies' without their sources), nothing that
no import reads, within 15 MiB for either architecture."""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra import build_artifact, local_invoke
from tests.sam import ROOT, project_copy, set_architecture
from tests.test_sam import build_dir, ric_dir, sam_bin  # noqa: F401  (shared fixtures)

FUNCTIONS = {"WorkerFunction": "pgkick.aws.worker", "ReaperFunction": "pgkick.aws.reaper"}
MAX_BYTES = 15 * 1024 * 1024  # the target: 15 MB, read as MiB (du -sh's unit)


# The wheels' top-level modules, which the build ships as sourceless bytecode.
DEPENDENCIES = (
    *("aws_lambda_powertools", "jmespath", "psycopg", "psycopg_binary", "typing_extensions"),
)


def sources(function_dir: Path) -> list[Path]:
    return sorted(function_dir.rglob("*.py"))


def sourceless(function_dir: Path) -> list[Path]:
    return sorted(p for p in function_dir.rglob("*.pyc") if p.parent.name != "__pycache__")


def assert_unchecked_hash(cached: Path) -> None:
    """This (the runtime's) interpreter's magic number and the unchecked-hash flags."""
    header = cached.read_bytes()[:8]
    assert header[:4] == importlib.util.MAGIC_NUMBER, cached
    flags = int.from_bytes(header[4:8], "little")
    assert flags == 0b01, f"{cached}: flags {flags:#b}, not unchecked-hash"


def test_build_compiles_for_the_templates_runtime() -> None:
    """The build refuses any Python but the template's runtime, and the runtime is the one
    the build compiles for: catches a template moved to python3.13 while the artifact is
    still compiled by 3.12 (every .pyc ignored, silently, at each cold start)."""
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=local_invoke._Loader)
    runtime = template["Globals"]["Function"]["Runtime"]
    assert runtime == "python{}.{}".format(*build_artifact.RUNTIME_VERSION)
    assert sys.version_info[:2] == build_artifact.RUNTIME_VERSION  # so the checks below hold
    for name, function in template["Resources"].items():
        if function["Type"] == "AWS::Serverless::Function":
            assert function["Metadata"] == {"BuildMethod": "makefile", "ContextPath": "infra"}, name


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_every_module_has_unchecked_hash_bytecode(build_dir: Path, function: str) -> None:  # noqa: F811
    """Every .py in the built function has a .pyc beside it, and every dependency's module
    is a .pyc alone, each for this (the runtime's) interpreter, hash-based and unchecked:
    fails on SAM's own Python builder (no .pyc at all), on a .pyc from another Python
    (wrong magic number) and on a timestamp .pyc (stale on Lambda: `sam package` dates
    every zipped file 1980)."""
    found = sources(build_dir / function)
    assert len(found) > 30  # pgkick and the handlers
    for source in found:
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.exists(), f"{source} has no bytecode"
        assert_unchecked_hash(cached)
    alone = sourceless(build_dir / function)
    assert len(alone) > 100  # Powertools, psycopg, jmespath, typing_extensions
    for cached in alone:
        assert_unchecked_hash(cached)


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_dependencies_are_sourceless_and_pgkick_keeps_its_source(
    build_dir: Path,  # noqa: F811
    function: str,
) -> None:
    """The wheels' modules are bytecode alone (x.pyc where x.py was: 1.1 MiB of sources
    less, which takes the arm64 artifact under 15 MiB) and pgkick's own code keeps its
    source, so a traceback through pgkick shows its lines while one through psycopg shows
    the file and line only (README, Deploy). Catches the build shipping the dependencies'
    sources again, one that makes pgkick sourceless too, and the dependencies compiled
    with column ranges (70 KB more, for carets under source lines they do not have) or
    with their docstrings (0.26 MiB more), and pgkick's own compiled with column ranges."""
    artifact = build_dir / function
    for name in DEPENDENCIES:
        package = artifact / name
        if package.is_dir():
            assert (package / "__init__.pyc").is_file(), name
            assert not [*package.rglob("*.py"), *package.rglob("__pycache__")], name
        else:
            assert (artifact / f"{name}.pyc").is_file(), name
            assert not [*artifact.glob(f"{name}.py"), *artifact.glob(f"__pycache__/{name}.*")]
    ours_db = artifact / "pgkick" / "connections" / "db.py"
    # pgkick's code keeps its source; its generated statements (strings, no frames) do not
    generated = [artifact / "pgkick" / "store" / "queries.pyc"]
    assert ours_db.exists() and sourceless(artifact / "pgkick") == generated
    # column ranges (traceback carets, under a source line) only where there is a source
    theirs_code = marshal.loads((artifact / "psycopg" / "connection.pyc").read_bytes()[16:])
    assert {column for _, _, column, _ in theirs_code.co_positions()} == {None}
    # and at -OO: their docstrings are not shipped (the module's own would be its first constant)
    docs = [c for c in theirs_code.co_consts if isinstance(c, str) and "connection object" in c]
    assert not docs, docs
    # pgkick's own bytecode without them too (0.03 MiB of the room under 15 MiB): its
    # tracebacks show each frame's source line, not the carets under the expression
    ours_pyc = Path(importlib.util.cache_from_source(str(ours_db)))
    ours_code = marshal.loads(ours_pyc.read_bytes()[16:])
    assert {column for _, _, column, _ in ours_code.co_positions()} == {None}
    script = (
        "import traceback, psycopg\n"
        "from pgkick.connections import db\n"
        "for call in (lambda: db.connect('no=such'), lambda: psycopg.connect('no=such')):\n"
        "    try:\n"
        "        call()\n"
        "    except Exception:\n"
        "        print(traceback.format_exc())\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(artifact), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], env=env, cwd=artifact, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # pgkick's frame names the file it was loaded from (here the build folder, in Lambda
    # /var/task), a dependency's the path compiled in (/var/task)
    ours = [i for i, line in enumerate(lines) if '/pgkick/connections/db.py", line' in line]
    assert "raise malformed(exc, dsn) from None" in lines[ours[-1] + 1]  # its source line
    theirs = [i for i, line in enumerate(lines) if '"/var/task/psycopg/connection.py"' in line]
    assert theirs, done.stdout
    for i in theirs:  # file and line, then the next frame or the error: no source text
        assert lines[i + 1].startswith(("  File ", "psycopg.")), lines[i : i + 2]


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_handlers_import_from_bytecode_alone(
    build_dir: Path,  # noqa: F811
    ric_dir: Path,  # noqa: F811
    tmp_path: Path,
    function: str,
) -> None:
    """Each handler imports in a copy of its artifact whose every compiled source is
    replaced by a module that raises: so no import compiled anything, each one read its
    .pyc, and never looked at the source (a timestamp or checked-hash .pyc would see the
    changed file and compile it, and raise); the dependencies have no source to compile.
    As Lambda runs it: no site-packages, no bytecode written (/var/task is read-only),
    the runtime's boto3 beside the artifact."""
    copy = tmp_path / function
    shutil.copytree(build_dir / function, copy)
    replaced = 0
    for source in sources(copy):
        if Path(importlib.util.cache_from_source(str(source))).exists():
            source.write_text(f"raise ImportError('compiled from source: {source.name}')\n")
            replaced += 1
    assert replaced > 30
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{copy}:{ric_dir}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "DATABASE_URL": "postgresql://pgkick@127.0.0.1:1/nothing",
        "PGKICK_KICKER": "none",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import {FUNCTIONS[function]}"],
        env=env,
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def assert_within_15_mib(artifact: Path) -> None:
    files = [p for p in artifact.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert total <= MAX_BYTES, f"{artifact.name}: {total / 2**20:.2f} MiB"
    assert not [p for p in files if p.suffix == ".pyi" or p.name == "py.typed"]
    assert not (artifact / "aws_lambda_powertools" / "event_handler").exists()
    assert not list(artifact.glob("*.dist-info/RECORD"))  # pip's manifest, read by no import


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_artifact_is_within_15_mib(build_dir: Path, function: str) -> None:  # noqa: F811
    """The unzipped artifact, bytecode included, is at most 15 MiB (Lambda counts the
    files' bytes): fails when boto3 is packaged again (+33 MB), or when the unused
    Powertools parts, the type stubs or the wheels' RECORD files stay (20.1 MB with bytecode)."""
    assert_within_15_mib(build_dir / function)


ELF_MACHINES = {"x86_64": 62, "arm64": 183}  # e_machine: EM_X86_64, EM_AARCH64


def elf_machine(artifact: Path) -> int:
    (library,) = (artifact / "psycopg_binary").glob("_psycopg.*.so")
    return int.from_bytes(library.read_bytes()[18:20], "little")


@pytest.fixture(scope="module")
def deployed_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """infra/build_artifact.py as `sam build` runs it (infra/Makefile): the template's
    architecture, arm64, which the tests' `sam build` (this machine's, x86_64) is not."""
    out = tmp_path_factory.mktemp("deployed") / "artifact"
    argv = [sys.executable, "infra/build_artifact.py", "functions", str(out)]
    subprocess.run(argv, cwd=ROOT, check=True)
    return out


def test_the_deployed_arm64_artifact_is_within_15_mib(deployed_build: Path) -> None:
    """The template deploys arm64, and its artifact is within 15 MiB too: psycopg-binary's
    aarch64 libraries are 2.6 MiB larger than x86_64's (64 KiB segment padding), which
    the dependencies' sourceless bytecode makes room for (16.15 MiB with their sources).
    Catches the sources shipped again, a dependency grown past the margin (0.18 MiB when
    last measured), and a template moved off arm64 without this test knowing."""
    assert build_artifact.template_architecture(ROOT / "template.yaml") == "arm64"
    assert elf_machine(deployed_build) == ELF_MACHINES["arm64"]
    assert_within_15_mib(deployed_build)


def test_pgkick_ships_its_sources_line_for_line_without_docstrings_or_comments(
    deployed_build: Path,
) -> None:
    """blank_sources(): each of pgkick's shipped .py files has the repository's lines, at
    the same numbers, with the text of its docstrings and comments gone (what a traceback
    through pgkick shows is a line of code, which must be the one that ran). Catches a
    line moved (a traceback naming the wrong code), a docstring or comment left in (the
    room under 15 MiB), and code changed or dropped."""
    shipped = sorted((deployed_build / "pgkick").rglob("*.py"))
    assert len(shipped) > 50, shipped  # the handlers' modules, not an empty build
    for path in shipped:
        ours = (ROOT / "functions" / path.relative_to(deployed_build)).read_text().split("\n")
        theirs = path.read_text().split("\n")
        assert len(theirs) == len(ours), path
        for number, (line, original) in enumerate(zip(theirs, ours, strict=True), 1):
            code = line.rstrip()
            # a line of code, less a trailing comment; or an emptied docstring's quotes
            assert original.startswith(code) or code.strip() in {'""', '"""'}, (path, number)
            assert "#" not in code or original.startswith(code), (path, number)
    bulk = (deployed_build / "pgkick" / "store" / "bulk.py").read_text()
    assert "Why arrays with one-value columns" not in bulk and "def rows_of(" in bulk


def test_the_build_takes_the_templates_architecture(tmp_path: Path) -> None:
    """The build reads the architecture from the template, with no second knob to match by
    hand: a template set to x86_64 builds x86_64 libraries, the repository's arm64 ones.
    Catches a build that ignores the template (an x86_64 psycopg on an arm64 Lambda: no
    import works) and an `Architectures` the build cannot read (it must fail, not guess)."""
    text = (ROOT / "template.yaml").read_text()
    assert "    Architectures: [arm64]\n" in text
    for architecture in ("x86_64", "arm64"):
        template = tmp_path / f"{architecture}.yaml"
        template.write_text(text)
        set_architecture(template, architecture)
        out = tmp_path / architecture
        argv = [sys.executable, "infra/build_artifact.py", "functions", str(out)]
        subprocess.run([*argv, "--template", str(template)], cwd=ROOT, check=True)
        assert elf_machine(out) == ELF_MACHINES[architecture], architecture
    unreadable = tmp_path / "parameter.yaml"
    unreadable.write_text(text.replace("[arm64]", "[!Ref Architecture]"))
    with pytest.raises(SystemExit, match="expected one `Architectures"):
        build_artifact.template_architecture(unreadable)


def test_a_cached_sam_build_runs_the_changed_build_script(
    sam_bin: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """samconfig.toml turns SAM's build cache on, and that cache keys on the CodeUri
    (functions/) only: infra/build_artifact.py is outside it. SAM CLI 1.170 never caches
    a `BuildMethod: makefile` function (each is a build definition of its own, rebuilt
    every time), so a changed build script reaches the next build. Catches a SAM CLI
    upgrade that starts caching them: the second build would keep the first's artifact."""
    project = project_copy(tmp_path / "project")
    argv = [str(sam_bin / "sam"), "build", "WorkerFunction", "--cached"]  # one: half the time
    argv += ["--cache-dir", str(tmp_path / "cache")]
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("VIRTUAL_ENV", None)

    def build() -> None:
        done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr

    build()
    script = project / "infra" / "build_artifact.py"
    text = script.read_text()
    assert "    precompile(args.artifacts)\n" in text
    script.write_text(
        text.replace(
            "    precompile(args.artifacts)\n",
            '    precompile(args.artifacts)\n    (args.artifacts / "changed").touch()\n',
        )
    )
    build()
    assert (project / ".aws-sam" / "build" / "WorkerFunction" / "changed").exists()


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The artifact as dangling_imports() sees it in a build: pruned, not yet compiled (the
    built one has no dependency sources left to read)."""
    out = tmp_path_factory.mktemp("assembled")
    build_artifact.assemble(ROOT / "functions", out, "x86_64")
    return out


def test_pruning_fails_the_build_when_a_kept_module_imports_a_removed_one(
    assembled: Path,
) -> None:
    """dangling_imports() names each import, lazy ones inside functions too, of a module the
    build removed: pgkick imports botocore inside a function (boto3 is imported on first
    use), which a list of what the handlers import at cold start would not show. Catches a
    prune list that breaks an import at run time. Powertools' parameters utility is pruned
    since pgkick reads the secret itself: nothing left imports it."""
    assert build_artifact.dangling_imports(assembled, ["botocore.config"]) == [
        "pgkick/awsapi/boto.py: botocore.config"
    ]
    parameters = "aws_lambda_powertools.utilities.parameters"
    assert build_artifact.dangling_imports(assembled, [parameters]) == []
    assert not (assembled / "aws_lambda_powertools" / "utilities" / "parameters").exists()
    # The one import of a removed package that stays: reached only for a pydantic model.
    removed = ["aws_lambda_powertools.event_handler.openapi.compat"]
    assert build_artifact.dangling_imports(assembled, removed) == []
    found = build_artifact.dangling_imports(assembled, ["psycopg.errors"])
    assert "psycopg/__init__.py: psycopg.errors" in found  # a dependency's .py is read


# boto3 and botocore in Lambda's python3.12 runtime, which the artifact uses (it packages
# neither). AWS's table ("Runtime-included SDK versions", lambda-python.html) could not be
# read where this was written; this figure is a third-party report of the runtime as of
# August 2025 (github.com/terricain/aioboto3/issues/381), and AWS only moves it forward.
LAMBDA_PYTHON312_BOTO3 = (1, 38, 36)
# What pgkick needs of boto3 at run time: lambda.Invoke (InvocationType=Event),
# scheduler.CreateSchedule with ActionAfterCompletion, scheduler.DeleteSchedule,
# secretsmanager.GetSecretValue (pgkick.awsapi.secrets), and botocore's Config with
# retries {"mode": "standard", "total_max_attempts"}. Checked by hand in botocore
# 1.34.32's own service models (each operation and member present), which is also the
# floor Powertools' aws-sdk extra asks for.
BOTO3_FLOOR = (1, 34, 32)


def test_boto3_floor_is_pinned_and_met_by_the_runtime() -> None:
    """pyproject pins boto3 at the floor pgkick's calls need, and the runtime's boto3 meets
    it: catches a pin raised past what Lambda provides (the artifact would then run
    against an older boto3 than any test did) or lowered below what the calls need."""
    text = (ROOT / "pyproject.toml").read_text()
    (pin,) = [line for line in text.splitlines() if line.strip().startswith('"boto3>=')]
    floor = tuple(int(part) for part in pin.split(">=")[1].split('"')[0].split("."))
    assert floor == BOTO3_FLOOR
    assert floor <= LAMBDA_PYTHON312_BOTO3


def test_the_shipped_statements_are_the_repositorys_less_their_descriptions(
    deployed_build: Path,
) -> None:
    """shorten_statements(): each statement the artifact ships is the repository's, its
    first line cut to `-- name:` and its whole-line comments gone, every other line the
    same (0.03 MiB of the room under 15 MiB). Catches a statement changed or lost in the
    rewrite, a name no longer first (the server's views say which statement ran by it),
    and a description shipped again."""
    from pgkick.store import queries

    code = marshal.loads((deployed_build / "pgkick" / "store" / "queries.pyc").read_bytes()[16:])
    shipped: dict[str, object] = {}
    exec(code, shipped)  # the module's constants, as Lambda imports them
    names = [n for n in vars(queries) if n.isupper() and isinstance(getattr(queries, n), str)]
    assert len(names) > 80
    for name in names:
        ours = getattr(queries, name).split("\n")
        theirs = str(shipped[name]).split("\n")
        assert theirs[0] == f"-- {name.lower()}:", theirs[0]
        assert theirs[1:] == [line for line in ours[1:] if not line.lstrip().startswith("--")]
    assert shipped["MIGRATION_VERSIONS"] == queries.MIGRATION_VERSIONS
