"""`pgkick bench` item `artifact`: what a Lambda cold start pays for the deployed code.

Two costs of issue 14: each function's artifact size, unzipped (Lambda counts the files'
bytes; it was 49 MB with boto3 packaged), and how long importing each handler takes in a
fresh Python that sees only the artifact (it was 626 ms before bytecode was precompiled).
Targets: <= 15 MiB and <= 300 ms.

Why infra/build_artifact.py and not `sam build`: it is what `sam build` runs for each
function (template.yaml: BuildMethod makefile, infra/Makefile), so the artifact is the
same, without SAM CLI's install and its minute of start-up. Both functions share the
CodeUri and the recipe, so one build serves both; each handler is timed on its own. The
build needs the repository (infra/, functions/): from an installed pgkick-dev alone the
item is skipped, with the reason printed.

Each import runs in a new `python -S` (no site-packages: only the artifact and the
standard library, as /var/task under Lambda's runtime) with bytecode writes off
(/var/task is read-only), timed inside the process around the import alone: wall and
CPU, median of several cold processes, with the spread. The artifact is built for this
machine's architecture so it can be imported here; the size reported first is the
template's architecture's (arm64, built apart when this machine is not one), with this
machine's beside it. Only this machine's architecture can be imported here: on an x86_64
machine the arm64 artifact's import is not timed (the Python parts, bytecode and all,
are the same files; only psycopg's compiled libraries differ).
"""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgkick_dev.bench.figures import spread

HANDLERS = {"WorkerFunction": "pgkick.aws.worker", "ReaperFunction": "pgkick.aws.reaper"}
BASELINE = {"size_mb": 49, "import_ms": 626}  # issue 14, as SAM's builder made it
TARGET = {"size_mib": 15, "import_ms": 300}
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
# The handlers read their settings at import: none of them reaches anything.
IMPORT_ENV = {
    "DATABASE_URL": "postgresql://pgkick@127.0.0.1:1/nothing",
    "PGKICK_KICKER": "none",
    "AWS_DEFAULT_REGION": "us-east-1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
TIMED_IMPORT = """
import importlib, json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
importlib.import_module(sys.argv[1])
print(json.dumps({"wall_ms": (time.perf_counter() - wall) * 1000,
                  "cpu_ms": (time.process_time() - cpu) * 1000}))
"""


def repository() -> Path | None:
    """The checkout this pgkick-dev runs from (a uv workspace member), if it is one."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "infra" / "build_artifact.py").is_file() and (folder / "functions").is_dir():
            return folder
    return None


def run(imports: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Build the artifact, then its size and `imports` cold imports of each handler."""
    root = repository()
    if root is None:
        return skipped("no pgkick repository here (infra/build_artifact.py, functions/)", say)
    if sys.version_info[:2] != (3, 12):
        return skipped("not Python 3.12, the runtime's: the artifact's bytecode is 3.12's", say)
    here = MACHINES.get(platform.machine())
    if here is None:
        return skipped(f"no Lambda architecture for this machine ({platform.machine()})", say)
    deployed = template_architecture(root)
    with tempfile.TemporaryDirectory(prefix="pgkick-artifact-") as scratch:
        built = build(root, Path(scratch) / here, here)
        sized = built if deployed == here else build(root, Path(scratch) / deployed, deployed)
        sizes = {deployed: size_mib(sized), here: size_mib(built)}
        result: dict[str, Any] = {
            "architecture": deployed,
            "size_mib": sizes[deployed],
            "sizes_mib": sizes,
            "imported_on": here,
            "imports": imports,
            "handlers": {},
        }
        for function, module in HANDLERS.items():
            # interleaved, so a burst of load on the machine falls on both handlers alike
            result["handlers"][function] = {"module": module, "samples": []}
        for _ in range(imports):
            for function, module in HANDLERS.items():
                sample = timed_import(built, module)
                result["handlers"][function]["samples"].append(sample)
    for function, row in result["handlers"].items():
        samples = row.pop("samples")
        row["import_ms"] = spread([round(s["wall_ms"], 1) for s in samples])
        row["import_cpu_ms"] = spread([round(s["cpu_ms"], 1) for s in samples])
        median = row["import_ms"]["median"]
        say(
            f"artifact: {function} {sizes_text(result)}, import median {median} ms "
            f"({result['imported_on']})"
        )
    return result


def size_mib(artifact: Path) -> float:
    """The artifact's size as Lambda counts it: the sum of its files' bytes, unzipped."""
    return round(sum(p.stat().st_size for p in artifact.rglob("*") if p.is_file()) / 2**20, 2)


def sizes_text(artifact: dict[str, Any]) -> str:
    """`14.91 MiB (arm64; x86_64 12.35 MiB)`: the deployed architecture's first."""
    deployed = artifact["architecture"]
    sizes = artifact.get("sizes_mib", {deployed: artifact["size_mib"]})
    others = "".join(f"; {arch} {size} MiB" for arch, size in sizes.items() if arch != deployed)
    return f"{sizes[deployed]} MiB ({deployed}{others})"


def template_architecture(root: Path) -> str:
    """The template's architecture, read as the build reads it (infra/build_artifact.py,
    loaded from the repository: infra/ is no package of pgkick-dev)."""
    spec = importlib.util.spec_from_file_location(
        "build_artifact", root / "infra" / "build_artifact.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.template_architecture(root / "template.yaml"))


def skipped(reason: str, say: Callable[[str], None]) -> dict[str, Any]:
    say(f"artifact: skipped: {reason}")
    return {"skipped": reason}


def build(root: Path, out: Path, architecture: str) -> Path:
    argv = [sys.executable, "infra/build_artifact.py", "functions", str(out)]
    argv += ["--architecture", architecture]
    subprocess.run(argv, cwd=root, check=True, capture_output=True)
    return out


def timed_import(artifact: Path, module: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-S", "-c", TIMED_IMPORT, module],
        cwd=artifact,
        env={"PYTHONPATH": str(artifact), **IMPORT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout))


def targets(artifact: dict[str, Any] | None) -> list[tuple[str, Any, bool]]:
    """The two targets of issue 14, each with this run's figures and the baseline."""
    size_label = (
        f"artifact size <= {TARGET['size_mib']} MiB unzipped, each function "
        f"(was {BASELINE['size_mb']} MB)"
    )
    import_label = (
        f"cold import of each handler <= {TARGET['import_ms']} ms "
        f"(median; was {BASELINE['import_ms']} ms)"
    )
    if not artifact or "skipped" in artifact:
        why = f"not measured ({artifact['skipped']})" if artifact else "not measured (artifact)"
        return [(size_label, why, False), (import_label, why, False)]
    handlers = artifact["handlers"]
    sizes = artifact.get("sizes_mib", {artifact["architecture"]: artifact["size_mib"]})
    on = artifact.get("imported_on", artifact["architecture"])
    import_label = import_label.replace("(median;", f"(median, {on};")
    measured = ", ".join(
        f"{name} {row['import_ms']['median']:.0f} ms "
        f"({row['import_ms']['min']:.0f}..{row['import_ms']['max']:.0f})"
        for name, row in handlers.items()
    )
    fast = all(row["import_ms"]["median"] <= TARGET["import_ms"] for row in handlers.values())
    return [
        (size_label, sizes_text(artifact), max(sizes.values()) <= TARGET["size_mib"]),
        (import_label, measured, fast),
    ]


def cost_rows(artifact: dict[str, Any] | None) -> list[list[Any]]:
    """bench.md's cost table: the size and each handler's import, wall and CPU."""
    if not artifact or "skipped" in artifact:
        why = f"not measured ({artifact['skipped']})" if artifact else "not measured (artifact)"
        return [["deployment artifact size", why], ["handler cold import time", why]]
    rows = [
        [
            f"deployment artifact, unzipped, each function (was {BASELINE['size_mb']} MB, "
            f"target <= {TARGET['size_mib']} MiB)",
            sizes_text(artifact),
        ]
    ]
    for name, row in artifact["handlers"].items():
        wall, cpu = row["import_ms"], row["import_cpu_ms"]
        rows.append(
            [
                f"cold import of `{row['module']}` ({name}), artifact only "
                f"({artifact.get('imported_on', artifact['architecture'])}), median of "
                f"{artifact['imports']} (was {BASELINE['import_ms']} ms, target <= "
                f"{TARGET['import_ms']} ms)",
                f"{wall['median']:.0f} ms ({wall['min']:.0f}..{wall['max']:.0f}); "
                f"CPU {cpu['median']:.0f} ms",
            ]
        )
    return rows
