"""What goes into the stand-in Lambda base image (infra/lambda_image.py), found on this
machine: each file's name in the image and where its bytes come from.

Why apart from the build: the list is also the image's identity (its content hash is
computed from it before anything is built, so an unchanged image is not rebuilt), and
it is where each thing the image needs is found, or a one-line reason it is not.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from fnmatch import fnmatchcase as fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAPID = ROOT / ".venv-sam" / "lib" / "python3.12" / "site-packages" / "samcli" / "local" / "rapid"
BUSYBOX = Path("/bin/busybox")
# Left out of /var/lang: nothing a function imports or links (headers, the static
# library and its build files, man pages, the test suite, IDLE, tkinter, pip's wheels).
PYTHON_SKIPPED = (
    "include",
    "share",
    "lib/pkgconfig",
    "lib/*.a",
    "lib/python3.12/config-3.12-*",
    *(f"lib/python3.12/{name}" for name in ("test", "idlelib", "tkinter", "turtledemo")),
    *(f"lib/python3.12/{name}" for name in ("ensurepip", "lib2to3/tests", "site-packages/*")),
    "lib/python3.12/lib-dynload/_tkinter.*",  # links X11 and Tk
)
# What Lambda's python3.12 runtime puts in /var/runtime (README, Deploy: the artifact
# leaves boto3 to the runtime), as installed in the environment running the build.
RUNTIME_DISTRIBUTIONS = (
    "awslambdaric",
    "simplejson",
    "snapshot-restore-py",
    *("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"),
)
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
ZONEINFO = Path("/usr/share/zoneinfo")
# AWS's, in substance: with a handler argument, the emulator in front of the runtime
# unless a Runtime API is already there (in Lambda, or SAM's own emulator).
ENTRYPOINT = b"""#!/bin/sh
if [ $# -ne 1 ]; then
  echo "entrypoint requires the handler name to be the first argument" 1>&2
  exit 142
fi
export _HANDLER="$1"
if [ -z "${AWS_LAMBDA_RUNTIME_API}" ]; then
  exec /usr/local/bin/aws-lambda-rie /var/runtime/bootstrap
else
  exec /var/runtime/bootstrap
fi
"""
BOOTSTRAP = b"""#!/bin/sh
export AWS_EXECUTION_ENV=AWS_Lambda_python3.12
export PYTHONPATH=/var/runtime
exec /var/lang/bin/python3.12 -m awslambdaric "$_HANDLER"
"""
ETC = {
    "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n",
    "etc/group": b"root:x:0:\n",
    "etc/nsswitch.conf": b"hosts: files dns\n",
    "etc/hosts": b"127.0.0.1 localhost\n",
}
LDD_PATH = re.compile(r"(/\S+) \(0x")
# All of glibc, as Amazon Linux has it, not only what ldd finds for Python: a function's
# own libraries (psycopg-binary's libpq) link libdl, libpthread, librt...; and libgcc_s,
# which glibc loads for thread cancellation.
GLIBC_EXTRAS = (
    *("libc.so.6", "libm.so.6", "libmvec.so.1", "libdl.so.2", "libpthread.so.0", "librt.so.1"),
    *("libutil.so.1", "libresolv.so.2", "libanl.so.1", "libnss_files.so.2", "libnss_dns.so.2"),
    *("libBrokenLocale.so.1", "libthread_db.so.1", "libgcc_s.so.1"),
)


@dataclass(frozen=True)
class Entry:
    """One member of the image's root filesystem."""

    name: str  # its path in the image, relative ("var/lang/bin/python3.12")
    kind: str = "file"  # "file", "dir" or "link"
    source: Path | None = None  # a file's bytes, from this machine
    data: bytes | None = None  # or given here
    target: str = ""  # a link's target
    mode: int = 0o644


def python_prefix() -> Path:
    """Where `python3.12` on PATH lives (pyenv's, or the system's)."""
    found = shutil.which("python3.12")
    if found is None:
        raise RuntimeError("no python3.12 on PATH to put in the image (pyenv: pyenv install 3.12)")
    prefix = subprocess.run(
        [found, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True
    ).stdout.strip()
    if not prefix or not (Path(prefix) / "bin" / "python3.12").exists():
        raise RuntimeError(f"{found}: no bin/python3.12 under its prefix {prefix!r}")
    return Path(prefix)


def tree(source: Path, dest: str, skipped: tuple[str, ...] = ()) -> list[Entry]:
    """Every directory, file and symlink under `source`, named under `dest`, less the
    paths (relative to `source`) matching a pattern of `skipped`, whose folders are not
    even walked."""
    found = [Entry(dest, "dir", mode=0o755)]

    def kept(relative: str) -> bool:
        return not any(fnmatch(relative, pattern) for pattern in skipped)

    for folder, dirs, files in os.walk(source):
        base = os.path.relpath(folder, source)
        base = "" if base == "." else base + "/"
        dirs[:] = sorted(d for d in dirs if kept(base + d))
        for name in [*dirs, *sorted(files)]:
            path = os.path.join(folder, name)
            if not kept(base + name):
                continue
            if os.path.islink(path):
                found.append(Entry(f"{dest}/{base}{name}", "link", target=os.readlink(path)))
            elif os.path.isdir(path):
                found.append(Entry(f"{dest}/{base}{name}", "dir", mode=0o755))
            else:
                mode = os.stat(path).st_mode & 0o777
                found.append(Entry(f"{dest}/{base}{name}", source=Path(path), mode=mode))
    return found


def runtime_files() -> list[Entry]:
    """awslambdaric, boto3 and their requirements, as installed here, in /var/runtime."""
    entries: dict[str, Entry] = {}
    for name in RUNTIME_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise RuntimeError(f"{name} is not installed here: run `uv sync`") from None
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if source.is_file() and "__pycache__" not in file.parts:
                parts = Path("var/runtime", file).parts
                for depth in range(2, len(parts)):
                    folder = "/".join(parts[:depth])
                    entries.setdefault(folder, Entry(folder, "dir", mode=0o755))
                entries[str(Path("var/runtime", file))] = Entry(
                    str(Path("var/runtime", file)), source=source
                )
    return list(entries.values())


def shared_libraries(binaries: list[Path], prefix: Path) -> list[Entry]:
    """The libraries `ldd` resolves for `binaries` (glibc's loader included), each under
    the path ldd names it by, its bytes from wherever that path resolves to."""
    done = subprocess.run(["ldd", *map(str, binaries)], capture_output=True, text=True)
    names = set(LDD_PATH.findall(done.stdout))
    names.update(m.split(" => ")[1].split()[0] for m in done.stdout.splitlines() if " => /" in m)
    for extra in GLIBC_EXTRAS:
        for folder in {str(Path(n).parent) for n in names if "libc.so" in n}:
            if (Path(folder) / extra).exists():
                names.add(f"{folder}/{extra}")
    found: dict[str, Entry] = {}
    for name in sorted(names):
        if name.startswith(str(prefix)):
            continue  # libpython: already in /var/lang/lib
        parts = Path(name).parts[1:]
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            found.setdefault(folder, Entry(folder, "dir", mode=0o755))
        found[name[1:]] = Entry(name[1:], source=Path(name).resolve(), mode=0o755)
    return list(found.values())


def busybox() -> list[Entry]:
    if not BUSYBOX.exists():
        raise RuntimeError(f"{BUSYBOX} is missing: apt-get install busybox-static")
    applets = subprocess.run(
        [str(BUSYBOX), "--list-full"], capture_output=True, text=True, check=True
    ).stdout.split()
    entries = [Entry(d, "dir", mode=0o755) for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin")]
    entries.append(Entry("bin/busybox", source=BUSYBOX, mode=0o755))
    entries += [Entry(a, "link", target="/bin/busybox") for a in applets if a != "bin/busybox"]
    return entries


def collect() -> tuple[list[Entry], str]:
    """Every entry of the image, and the Python version put in it."""
    prefix = python_prefix()
    machine = platform.machine().lower()
    rie = RAPID / f"aws-lambda-rie-{'arm64' if machine in ('aarch64', 'arm64') else machine}"
    if not rie.exists():
        raise RuntimeError(f"{rie} is missing: the emulator comes with aws-sam-cli (.venv-sam)")
    version = subprocess.run(
        [str(prefix / "bin" / "python3.12"), "--version"], capture_output=True, text=True
    ).stdout.strip()
    entries = busybox()
    entries += [Entry(d, "dir", mode=0o755) for d in ("var", "var/task", "opt", "etc", "root")]
    entries += [Entry("tmp", "dir", mode=0o1777), Entry("usr/local", "dir", mode=0o755)]
    entries += [Entry("usr/local/bin", "dir", mode=0o755)]
    entries += tree(prefix, "var/lang", PYTHON_SKIPPED)
    entries += [Entry("var/runtime", "dir", mode=0o755), *runtime_files()]
    entries.append(Entry("var/runtime/bootstrap", data=BOOTSTRAP, mode=0o755))
    entries.append(Entry("lambda-entrypoint.sh", data=ENTRYPOINT, mode=0o755))
    entries.append(Entry("usr/local/bin/aws-lambda-rie", source=rie, mode=0o755))
    entries += [Entry(name, data=data) for name, data in ETC.items()]
    for folder in ("etc/ssl", "etc/ssl/certs", "etc/pki", "etc/pki/tls", "etc/pki/tls/certs"):
        entries.append(Entry(folder, "dir", mode=0o755))
    if CA_BUNDLE.exists():  # Debian's path, and Amazon Linux's (where OpenSSL looks there)
        entries.append(Entry("etc/ssl/certs/ca-certificates.crt", source=CA_BUNDLE))
        entries.append(Entry("etc/pki/tls/certs/ca-bundle.crt", source=CA_BUNDLE))
    entries += [Entry("usr/share", "dir", mode=0o755), *tree(ZONEINFO, "usr/share/zoneinfo")]
    entries.append(Entry("etc/localtime", "link", target="/usr/share/zoneinfo/UTC"))
    extensions = [e.source for e in entries if e.source and e.source.suffix == ".so"]
    libraries = shared_libraries([prefix / "bin" / "python3.12", *extensions], prefix)
    unique: dict[str, Entry] = {}
    for entry in [*entries, *libraries]:  # the first of any name (a folder made twice)
        unique.setdefault(os.path.normpath(entry.name), entry)
    return list(unique.values()), f"{version} from {prefix}"
