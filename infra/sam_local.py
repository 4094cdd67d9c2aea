"""`sam local invoke` and `sam local start-lambda` on this machine, in one command that
prints each step: the base image, a build this machine can run, the database reached from
the container, then SAM itself.

Why one command: each step has a way to fail silently. The template deploys arm64, and
SAM picks its base image and emulator by the template's architecture, while the build
(infra/Makefile) installs psycopg's binary for the architecture it is given: here both
are this machine's, in a build folder of their own (`sam deploy` never reads it). SAM
runs images only (`--skip-pull-image`, and the stand-in from infra/lambda_image.py by
`--invoke-image` unless another is named). The container reaches the database through
infra/docker_bridge.py, and SAM gets none of the shell's values for the template's
variables (infra/sam_local_env.py says why).

    uv run python infra/sam_local.py invoke WorkerFunction -e infra/events/kick.json --dsn DSN
    uv run python infra/sam_local.py start-lambda --dsn DSN      # serves until Ctrl-C
    --template examples/orders/template.yaml   another app's template (the example's)
    --image public.ecr.aws/lambda/python:3.12-x86_64   AWS's image, pulled beforehand
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script (python infra/sam_local.py)
    sys.path.insert(0, str(ROOT))

from infra import docker_bridge, lambda_image  # noqa: E402
from infra.sam_local_env import (  # noqa: E402
    CONTAINER_HOST,
    Forwarder,
    check_server,
    container_dsn,
    sam_environment,
    write_env_file,
)
from pgkick_dev.devserver.ports import taken_by_another  # noqa: E402

SAM = ROOT / ".venv-sam" / "bin" / "sam"
BUILT_ARCHITECTURE = re.compile(r"^(\s*Architectures:\s*(?:\n\s*-\s*|\[\s*))(arm64|x86_64)", re.M)


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def docker_problem() -> str | None:
    """Why no Docker daemon answers here, or None when one does."""
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "no docker command (Debian: apt-get install docker.io)"
    if done.returncode != 0:
        return "no Docker daemon answers: " + " ".join(done.stderr.split())[-300:]
    return None


def set_built_architecture(template: Path, architecture: str) -> None:
    """Write `architecture` into a built template's one `Architectures` (Globals): SAM
    chooses the image and the emulator by it, and the build made this one."""
    text = template.read_text()
    found = BUILT_ARCHITECTURE.findall(text)
    if len(found) != 1:
        raise RuntimeError(f"{template}: expected one Architectures, found {len(found)}")
    template.write_text(BUILT_ARCHITECTURE.sub(rf"\g<1>{architecture}", text))


def build(template: Path, build_dir: Path, architecture: str) -> Path:
    """`sam build` of `template` for `architecture` into `build_dir` (its own cache
    beside it); returns the built template, set to that architecture."""
    step(f"sam build for {architecture} into {build_dir} (PGKICK_ARCHITECTURE={architecture})")
    env = sam_environment(template) | {"PGKICK_ARCHITECTURE": architecture}
    argv = [str(SAM), "build", "-t", str(template), "--build-dir", str(build_dir)]
    argv += ["--cache-dir", f"{build_dir}.cache"]
    done = subprocess.run(argv, cwd=template.parent, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"sam build failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    built = build_dir / "template.yaml"
    set_built_architecture(built, architecture)
    return built


def image(tag: str | None) -> str:
    """The image SAM runs the functions in: `tag`, or the stand-in, built if it is not."""
    if tag:
        step(f"base image: {tag} (as given)")
        return tag
    tag = lambda_image.default_tag()
    step(f"base image: {tag}, the stand-in (infra/lambda_image.py)")
    lambda_image.build(tag, report=lambda line: print(f"    {line}"))
    return tag


def sam_argv(command: str, built: Path, env_file: Path, invoke_image: str) -> list[str]:
    argv = [str(SAM), "local", command, "-t", str(built), "--env-vars", str(env_file)]
    argv += ["--add-host", f"{CONTAINER_HOST}:host-gateway", "--skip-pull-image"]
    return [*argv, "--invoke-image", invoke_image]


def prepare(args: argparse.Namespace) -> tuple[Path, str]:
    """Steps 1-3: the daemon, the image, the build; returns the built template and image."""
    problem = docker_problem()
    if problem:
        raise RuntimeError(problem)
    step("Docker daemon answers")
    invoke_image = image(args.image)
    architecture = lambda_image.machine_architecture()
    template = Path(args.template).resolve()
    build_dir = Path(args.build_dir or template.parent / ".aws-sam" / f"local-{architecture}")
    return build(template, build_dir.resolve(), architecture), invoke_image


def run_sam(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    """SAM until it exits; on Ctrl-C or a `kill` (SIGTERM, raised here as
    KeyboardInterrupt), SAM is stopped first, then the forwarder. SIGTERM, not SIGINT:
    a shell script's background job ignores SIGINT, and SAM with it."""
    process = subprocess.Popen(argv, env=env, cwd=cwd)
    try:
        return process.wait()
    except KeyboardInterrupt:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second kill: finish cleaning up
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise


def interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, interrupted)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["invoke", "start-lambda", "build"])
    parser.add_argument("function", nargs="?", default="WorkerFunction")
    parser.add_argument("-e", "--event", default=str(ROOT / "infra" / "events" / "kick.json"))
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"), help="$DATABASE_URL")
    parser.add_argument("--template", default=str(ROOT / "template.yaml"))
    parser.add_argument("--build-dir", help="default: .aws-sam/local-<arch> by the template")
    parser.add_argument("--image", help="default: the stand-in, pgkick/lambda-python:3.12-<arch>")
    parser.add_argument("--port", type=int, default=3001, help="start-lambda's port")
    args = parser.parse_args(argv)
    if args.command != "build" and not args.dsn:
        parser.error("no database: give --dsn or set DATABASE_URL")
    try:
        if not SAM.exists():  # checked by the stand-in image's build too, but not with --image
            raise RuntimeError(
                f"{SAM} is missing: make SAM CLI's environment first (uv venv .venv-sam "
                "--python 3.12 && VIRTUAL_ENV=.venv-sam uv pip install -r "
                "infra/sam-requirements.txt)"
            )
        if args.command != "build":  # the DSN first: the image and the build take 30 s
            check_server(args.dsn)
        if args.command == "start-lambda" and taken_by_another("127.0.0.1", args.port):
            raise RuntimeError(  # else said by SAM after the build; a connect finds the other
                f"127.0.0.1:{args.port} is in use by another process (another start-lambda? "
                "pgkick dev?): stop it, or serve another port with --port N"
            )
        built, invoke_image = prepare(args)
        if args.command == "build":
            print(built)
            return 0
        with Forwarder(args.dsn) as forwarder, tempfile.TemporaryDirectory() as scratch:
            url = container_dsn(args.dsn, forwarder.port)
            step(
                f"database: {forwarder.listen}:{forwarder.port} forwards to "
                f"{forwarder.target[0]}:{forwarder.target[1]}; the container uses {url}"
            )
            env_file = write_env_file(Path(scratch) / "env.json", url)
            sam = sam_argv(args.command, built, env_file, invoke_image)
            if args.command == "invoke":
                sam = [*sam, args.function, "-e", str(Path(args.event).resolve())]
            else:
                sam = [*sam, "--port", str(args.port)]
            step(" ".join(sam))
            return run_sam(sam, sam_environment(built), built.parent)
    except (RuntimeError, ValueError, docker_bridge.NoBridge) as error:
        print(f"sam_local.py: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
