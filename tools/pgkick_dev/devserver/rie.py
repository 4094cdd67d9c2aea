"""Where the dev stack finds AWS's Runtime Interface Emulator (RIE), behind each environment.

Why the emulator: Lambda's own runtime client (`awslambdaric`) runs the handler, and it
speaks only the Runtime API; the RIE serves that API and the HTTP invoke endpoint, as
Lambda's service does (it is what `sam local` runs inside its containers). So the
context, the marshalling of the answer, the error shape and the timeout are AWS's, not a
stand-in's. The binary ships inside the `aws-sam-cli` package (samcli/local/rapid/).

Looked for, in order, and the first that exists is used:
1. `$PGKICK_DEV_RIE`, a path to the binary (an error if it names nothing);
2. the `samcli` package of the `sam` command on PATH;
3. this repository's `.venv-sam` (made by the tests, tests/sam.py);
4. the cache, `$XDG_CACHE_HOME/pgkick/rie/<version>/` (else `~/.cache/...`);
5. else the `aws-sam-cli` wheel of `SAM_VERSION` is fetched from PyPI once (8 MB,
   checked against PyPI's sha256) and only the binary is kept in that cache, saying so.
If none works, `RieMissing` says what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import stat
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

SAM_VERSION = "1.170.0"  # as infra/sam-requirements.txt pins it (a test keeps them equal)
RAPID = Path("samcli") / "local" / "rapid"
REPO = Path(__file__).resolve().parents[3]  # the checkout, when the tooling runs from it
ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


class RieMissing(Exception):
    """No emulator binary could be found or fetched; the message says what to do."""


def binary_name() -> str:
    arch = ARCHITECTURES.get(platform.machine().lower())
    if arch is None:
        raise RieMissing(f"no Lambda emulator for this machine ({platform.machine()})")
    return f"aws-lambda-rie-{arch}"


def cache_dir(env: Mapping[str, str]) -> Path:
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pgkick" / "rie" / SAM_VERSION


def candidates(env: Mapping[str, str]) -> list[Path]:
    """Where an installed SAM CLI keeps the binary: beside `sam`'s Python, and .venv-sam."""
    name = binary_name()
    found: list[Path] = []
    sam = shutil.which("sam", path=env.get("PATH"))
    if sam is not None:
        prefix = Path(sam).resolve().parent.parent
        found += sorted(prefix.glob(f"lib/python3*/site-packages/{RAPID}/{name}"))
        found += sorted(prefix.glob(f"libexec/lib/python3*/site-packages/{RAPID}/{name}"))
    found += sorted(REPO.glob(f".venv-sam/lib/python3*/site-packages/{RAPID}/{name}"))
    found.append(cache_dir(env) / name)
    return found


def locate(
    env: Mapping[str, str] | None = None,
    *,
    say: Callable[[str], None] = print,
    fetch: Callable[[Path, Callable[[str], None]], Path] | None = None,
) -> Path:
    """The emulator binary for this machine (see the module's docstring for the order)."""
    env = os.environ if env is None else env
    chosen = env.get("PGKICK_DEV_RIE")
    if chosen:
        path = Path(chosen)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RieMissing(
                f"PGKICK_DEV_RIE={chosen} is not an executable file: point it at "
                f"samcli/local/rapid/{binary_name()} of an aws-sam-cli install, or unset it"
            )
        return path
    for path in candidates(env):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    try:
        return (fetch or fetch_from_pypi)(cache_dir(env), say)
    except (OSError, ValueError, KeyError) as exc:
        raise RieMissing(
            "pgkick dev runs each invocation through AWS's Runtime Interface Emulator, and "
            f"none was found (PGKICK_DEV_RIE, `sam` on PATH, .venv-sam, {cache_dir(env)}) nor "
            f"fetched from PyPI ({exc}). Install the SAM CLI (`pip install "
            f"aws-sam-cli=={SAM_VERSION}`) or set PGKICK_DEV_RIE to its "
            f"samcli/local/rapid/{binary_name()}"
        ) from exc


def fetch_from_pypi(target: Path, say: Callable[[str], None]) -> Path:
    """aws-sam-cli's wheel from PyPI, checked by its sha256; only the emulator is kept."""
    name = binary_name()
    index = "https://pypi.org/pypi/aws-sam-cli/json"  # the project's page: every release
    with urllib.request.urlopen(index, timeout=30) as answer:
        release = json.load(answer)["releases"][SAM_VERSION]
    (wheel,) = [u for u in release if u["packagetype"] == "bdist_wheel"]
    url = urllib.parse.urljoin(index, wheel["url"])  # a mirror may give it relative
    say(
        f"pgkick dev: fetching AWS's Lambda Runtime Interface Emulator once, from PyPI's "
        f"{wheel['filename']} ({wheel['size'] // 1_000_000} MB), into {target}"
    )
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        download = Path(scratch) / wheel["filename"]
        with urllib.request.urlopen(url, timeout=120) as answer:
            download.write_bytes(answer.read())
        digest = hashlib.sha256(download.read_bytes()).hexdigest()
        if digest != wheel["digests"]["sha256"]:
            raise ValueError(f"{wheel['filename']}: sha256 {digest} is not PyPI's")
        with zipfile.ZipFile(download) as archive:
            data = archive.read(f"{RAPID.as_posix()}/{name}")
        partial = Path(scratch) / name
        partial.write_bytes(data)
        partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        partial.replace(target / name)  # atomic: a concurrent caller sees all of it or none
    return target / name
