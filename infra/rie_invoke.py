"""Invoke a *built* function through Lambda's own runtime, locally, without Docker.

Why: a handler called with a hand-made context and `json.dumps` is not what AWS
runs. Here the pieces are AWS's own: the Runtime Interface Emulator binary that
ships inside the `aws-sam-cli` package (what `sam local invoke` runs in its
container) serves the Runtime API and the HTTP invoke endpoint, and `awslambdaric`
(the Runtime Interface Client, as in Lambda's Python images) fetches the event,
builds the context, calls the handler and marshals its answer or its error. So the
real marshalling (a `datetime` in an answer fails as `Runtime.MarshalError`), the
real context (request id, deadline from the function's Timeout, memory size), the
real timeout (`Task timed out`) and the real error shape (`errorType`,
`errorMessage`, `stackTrace`) are what the tests see.

The runtime's Python sees only the artifact folder and a folder holding what
Lambda's runtime provides, `awslambdaric` and boto3 with their requirements, copied
from the installed distributions (so no network); `-S` keeps site-packages out.
The function's environment comes from the built template, as in
`infra/local_invoke.py` (Globals merged, SAM's `--env-vars` file format), which
stays only as the fallback when no emulator binary for this machine or no
`awslambdaric` is at hand; `invoke()` says when.

    uv run python infra/rie_invoke.py WorkerFunction -e infra/events/kick.json \\
        --env-vars infra/env.json [--build-dir .aws-sam/build]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from infra import local_invoke

ROOT = Path(__file__).resolve().parent.parent
RIE_DIR = ROOT / ".venv-sam" / "lib" / "python3.12" / "site-packages" / "samcli" / "local" / "rapid"
INVOKE_PATH = "/2015-03-31/functions/function/invocations"
# What Lambda's python3.12 runtime puts beside the function (/var/runtime): the runtime
# client and boto3, which the artifact therefore leaves out (functions/requirements.txt).
RUNTIME_DISTRIBUTIONS = (
    "awslambdaric",
    "simplejson",
    "snapshot-restore-py",
    *("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"),
)


def rie_binary(rie_dir: Path = RIE_DIR) -> Path | None:
    """The emulator for this machine's architecture, from the aws-sam-cli package in
    .venv-sam; else wherever `pgkick dev` finds it (pgkick_dev.devserver.rie: PGKICK_DEV_RIE,
    `sam` on PATH, its cache, PyPI's wheel once); None if nowhere."""
    from pgkick_dev.devserver import rie

    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
    name = arch.get(platform.machine().lower())
    path = rie_dir / f"aws-lambda-rie-{name}"
    if name and path.exists():
        return path
    try:
        return rie.locate()
    except rie.RieMissing as exc:
        print(f"rie_invoke: {exc}", flush=True)
        return None


def runtime_client_dir(target: Path) -> Path | None:
    """`awslambdaric` and its requirements, copied file by file from the installed
    distributions into `target`; None when it is not installed (the fallback is used)."""
    try:
        dists = [importlib.metadata.distribution(name) for name in RUNTIME_DISTRIBUTIONS]
    except importlib.metadata.PackageNotFoundError:
        return None
    marker = target / f"awslambdaric-{dists[0].version}.ready"
    if marker.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    for dist in dists:
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if source.is_file() and "__pycache__" not in file.parts:
                (target / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / file)
    marker.touch()
    return target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Invocation:
    """One answer from the invoke endpoint: the payload Lambda would return, and the
    function's log lines for it (START ... REPORT), as CloudWatch would hold them."""

    payload: Any
    logs: str

    @property
    def error_type(self) -> str | None:
        """Lambda's error shape: {"errorType", "errorMessage", ...} instead of an answer."""
        if isinstance(self.payload, dict) and "errorType" in self.payload:
            return str(self.payload["errorType"])
        return None


class Emulator:
    """One function's execution environment: the emulator and, from the first invoke on,
    the runtime process it starts (cold start, then warm invokes, as in Lambda)."""

    def __init__(
        self,
        logical_id: str,
        *,
        build_dir: Path,
        env_file: Path | None,
        ric_dir: Path,
        rie: Path,
        python: str = sys.executable,
    ) -> None:
        template_path = build_dir / "template.yaml"
        if not template_path.exists():
            raise SystemExit(f"{template_path} is missing: run `sam build` first")
        template = yaml.load(template_path.read_text(), Loader=local_invoke._Loader)
        config = local_invoke.function_config(template, logical_id)
        self.code_dir = (build_dir / str(config["CodeUri"])).resolve()
        memory = local_invoke.resolve(config.get("MemorySize", 128), template.get("Parameters", {}))
        self.env = local_invoke.environment(template, logical_id, env_file) | {
            "LAMBDA_TASK_ROOT": str(self.code_dir),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": memory or "128",
            "PYTHONPATH": f"{self.code_dir}:{ric_dir}",
            "PYTHONDONTWRITEBYTECODE": "1",  # leave the artifact as sam build made it
        }
        self.port = free_port()
        self.argv = [
            str(rie),
            "--log-level",
            "error",
            "--runtime-interface-emulator-address",
            f"127.0.0.1:{self.port}",
            "--runtime-api-address",
            f"127.0.0.1:{free_port()}",
            python,
            "-S",  # no site-packages: the artifact and awslambdaric only
            "-m",
            "awslambdaric",
            str(config["Handler"]),
        ]
        self.log_path = build_dir / f"{logical_id}-rie-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Emulator:
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.argv, env=self.env, cwd=self.code_dir, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError(f"the emulator did not listen: {self.log_path.read_text()}")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def invoke(self, event: Any, *, timeout: float = 900) -> Invocation:
        start = self.log_path.stat().st_size
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{INVOKE_PATH}", data=json.dumps(event).encode()
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
        time.sleep(0.05)  # the REPORT line follows the answer
        with self.log_path.open("rb") as log:
            log.seek(start)
            logs = log.read().decode(errors="replace")
        return Invocation(json.loads(body) if body else None, logs)


def invoke(
    logical_id: str, event: Path, *, build_dir: Path, env_file: Path | None
) -> tuple[str, Invocation]:
    """One cold invoke through the emulator; returns ("rie", ...), or ("fallback", ...)
    from infra/local_invoke.py when the emulator or awslambdaric is missing."""
    rie = rie_binary()
    ric_dir = runtime_client_dir(build_dir / "runtime-client") if rie else None
    if rie is None or ric_dir is None:
        print("rie_invoke: no emulator or awslambdaric here; fallback: local_invoke", flush=True)
        code, result, output = local_invoke.invoke(
            logical_id, event, build_dir=build_dir, env_file=env_file
        )
        payload = result if code == 0 else {"errorType": "Fallback", "errorMessage": output}
        return "fallback", Invocation(payload, output)
    with Emulator(
        logical_id, build_dir=build_dir, env_file=env_file, ric_dir=ric_dir, rie=rie
    ) as emulator:
        return "rie", emulator.invoke(json.loads(event.read_text()))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("function", help="logical id, e.g. WorkerFunction")
    parser.add_argument("-e", "--event", type=Path, required=True)
    parser.add_argument("-n", "--env-vars", type=Path)
    parser.add_argument("--build-dir", type=Path, default=ROOT / ".aws-sam" / "build")
    args = parser.parse_args(argv)
    _, answer = invoke(args.function, args.event, build_dir=args.build_dir, env_file=args.env_vars)
    print(answer.logs, end="")
    print(json.dumps(answer.payload))
    return 1 if answer.error_type else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
