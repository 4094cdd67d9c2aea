"""Build a stand-in for Lambda's python3.12 base image from this machine's own files.

Why: `sam local invoke` and `sam local start-lambda` run a function in a container made
from `public.ecr.aws/lambda/python:3.12-<arch>`, which has to be pulled from AWS's
registry. Where that is impossible (no internet: CI here), this makes an image that does
the same job from files already on the machine, with no download, and tags it under
pgkick's own name (`pgkick/lambda-python:3.12-x86_64`), never AWS's; SAM is pointed at
it with `--invoke-image`. With internet, use AWS's image and skip this.

What goes in (one `tar | docker import`, no Dockerfile, no base image):
- busybox-static as /bin/sh and the tools SAM's own layer runs (mv, chmod);
- this machine's Python 3.12 (the interpreter `python3.12` finds) at /var/lang, less
  its test suite, IDLE, tkinter, ensurepip and its site-packages;
- in /var/runtime, the runtime client (`awslambdaric`) and boto3 with their
  requirements, copied from the environment running this script, and a `bootstrap`;
- the Runtime Interface Emulator from the aws-sam-cli package (/usr/local/bin) and a
  /lambda-entrypoint.sh that does what AWS's does (the emulator when
  AWS_LAMBDA_RUNTIME_API is unset, else the runtime itself);
- the shared libraries `ldd` finds for all of that, glibc's loader, CA certificates
  and zoneinfo; Lambda's environment variables (PATH, LD_LIBRARY_PATH, LANG, TZ...).

How it differs from AWS's image: Debian's glibc and libraries, not Amazon Linux 2023's;
this machine's CPython build; the venv's awslambdaric and boto3 versions, not the
runtime's; busybox instead of bash and coreutils. `--print` lists these.

Idempotent: the image carries a hash of everything it is made from (label
`pgkick.content-hash`); a tag that already has the same hash is not rebuilt.

    uv run python infra/lambda_image.py [--tag T] [--print]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import platform
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script (python infra/lambda_image.py)
    sys.path.insert(0, str(ROOT))

from infra.image_files import Entry, collect  # noqa: E402

REPOSITORY = "pgkick/lambda-python"
HASH_LABEL = "pgkick.content-hash"
ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
# Lambda's own environment for python3.12 (what AWS's image declares).
ENVIRONMENT = {
    "PATH": "/var/lang/bin:/usr/local/bin:/usr/bin/:/bin:/opt/bin",
    "LD_LIBRARY_PATH": "/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib"
    ":/var/task:/var/task/lib:/opt/lib",
    "LANG": "en_US.UTF-8",
    "TZ": ":/etc/localtime",
    "LAMBDA_TASK_ROOT": "/var/task",
    "LAMBDA_RUNTIME_DIR": "/var/runtime",
}
DISTRIBUTIONS = ("awslambdaric", "boto3", "botocore")


def machine_architecture() -> str:
    machine = platform.machine().lower()
    if machine not in ARCHITECTURES:
        raise RuntimeError(f"Lambda has no architecture for this machine ({machine})")
    return ARCHITECTURES[machine]


def default_tag() -> str:
    return f"{REPOSITORY}:3.12-{machine_architecture()}"


def content_hash(entries: list[Entry], root: Path = ROOT) -> str:
    """A hash of what the image is made of: each entry's name, kind and source, and this
    script and its helper, so a change to any of them rebuilds. A source inside this
    clone (its venvs' awslambdaric and boto3, `.venv-sam`'s emulator) by its bytes, any
    other (the interpreter, the system's libraries) by its size and mtime: hashing those
    by mtime made clones sharing one Docker daemon rebuild each other's image at every
    run (each clone's venv installs the same files at other times; left in note 61)."""
    digest = hashlib.sha256()
    for helper in (Path(__file__), Path(__file__).with_name("image_files.py")):
        digest.update(helper.read_bytes())
    for entry in entries:
        digest.update(f"{entry.name}\0{entry.kind}\0{entry.target}\0".encode())
        source = entry.source
        if source is not None and source.resolve().is_relative_to(root):
            digest.update(hashlib.sha256(source.read_bytes()).digest())
        elif source is not None:
            stat = source.stat()
            digest.update(f"{stat.st_size}\0{stat.st_mtime_ns}".encode())
        digest.update(b"\n" + (entry.data or b""))
    return digest.hexdigest()[:16]


def existing_hash(tag: str) -> str | None:
    """The content hash label of the image tagged `tag`, or None if there is none."""
    label = f'{{{{index .Config.Labels "{HASH_LABEL}"}}}}'
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", label, tag],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def write_tar(entries: list[Entry], out: io.BufferedIOBase) -> None:
    """The root filesystem as a tar stream (no folder is made on disk)."""
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.mtime = int(time.time())
            info.mode = entry.mode
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, entry.target
                tar.addfile(info)
            elif entry.data is not None:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                assert entry.source is not None
                info.size = entry.source.stat().st_size
                with entry.source.open("rb") as source:
                    tar.addfile(info, source)


def import_image(entries: list[Entry], tag: str, digest: str) -> None:
    changes = [f"ENV {name}={value}" for name, value in ENVIRONMENT.items()]
    changes += ["WORKDIR /var/task", 'ENTRYPOINT ["/lambda-entrypoint.sh"]']
    changes += [f"LABEL {HASH_LABEL}={digest}"]
    argv = ["docker", "import", *(f"--change={change}" for change in changes), "-", tag]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=False)
    assert process.stdin is not None
    try:
        write_tar(entries, process.stdin)  # type: ignore[arg-type]
    except BrokenPipeError:
        pass
    finally:
        process.stdin.close()
    out = process.stdout.read().decode() if process.stdout else ""
    if process.wait() != 0:
        raise RuntimeError(f"docker import failed for {tag}: {out.strip() or 'see above'}")


def differences(python: str) -> list[str]:
    """How this image differs from AWS's, one line each."""
    versions = {name: importlib.metadata.version(name) for name in DISTRIBUTIONS}
    glibc = platform.libc_ver()
    return [
        f"libraries: this machine's (glibc {glibc[1]}), not Amazon Linux 2023's (glibc 2.34)",
        f"python: {python} (this machine's build), not the runtime's own 3.12 build",
        "runtime client and SDK: the project's venv's "
        + ", ".join(f"{name} {version}" for name, version in versions.items())
        + ", not the versions Lambda ships",
        "shell and tools: busybox-static, not bash and coreutils; no yum/dnf",
    ]


def build(tag: str, *, report: Callable[[str], object] = print) -> str:
    """Make the image if `tag` is missing or made of something else; returns its hash."""
    entries, _ = collect()
    digest = content_hash(entries)
    if existing_hash(tag) == digest:
        report(f"{tag}: up to date (content hash {digest})")
        return digest
    size = sum(e.source.stat().st_size for e in entries if e.source is not None)
    report(f"{tag}: importing {len(entries)} entries, {size / 2**20:.0f} MiB (hash {digest})")
    started = time.monotonic()
    replaced = image_id(tag)
    import_image(entries, tag, digest)
    report(f"{tag}: built in {time.monotonic() - started:.1f} s")
    # SAM layers its emulator on the base once (REPOSITORY:rapid-<arch>) and reuses that
    # image while its tag exists: remove it, or SAM keeps running the previous build.
    stale = [tag.rpartition(":")[0] + f":rapid-{arch}" for arch in ("x86_64", "arm64")]
    stale += [replaced] if replaced is not None and replaced != image_id(tag) else []
    for old in stale:
        subprocess.run(["docker", "image", "rm", old], capture_output=True, check=False)
    return digest


def image_id(tag: str) -> str | None:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", help="default: pgkick/lambda-python:3.12-<this machine's arch>")
    parser.add_argument("--print", action="store_true", help="list what differs, build nothing")
    args = parser.parse_args(argv)
    try:
        tag = args.tag or default_tag()
        _, python = collect()
    except RuntimeError as error:
        print(f"lambda_image.py: {error}", file=sys.stderr)
        return 1
    print(f"{tag}: a stand-in for public.ecr.aws/lambda/python:3.12-{machine_architecture()}")
    print("contains: busybox, Python at /var/lang, awslambdaric + boto3 in /var/runtime,")
    print("  the Runtime Interface Emulator, /lambda-entrypoint.sh, CA certificates, zoneinfo")
    print("differs from AWS's image in:")
    for line in differences(python):
        print(f"  - {line}")
    if args.print:
        return 0
    try:
        build(tag)
    except (RuntimeError, OSError) as error:
        print(f"lambda_image.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
