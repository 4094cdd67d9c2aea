"""Let `sam local invoke` on Linux reach a PostgreSQL that listens on 127.0.0.1 only.

Why: on Linux, a container's 127.0.0.1 is its own and `host.docker.internal` does not
resolve unless it is added (`--add-host host.docker.internal:host-gateway`, which
names the host's address on Docker's bridge). A server on the host's loopback (the
embedded one, or a default install) is not listening there, and its pg_hba.conf
admits loopback clients only. This forwards the bridge address's port to the
server's loopback port, so the server sees loopback clients and needs no change.

    uv run python infra/docker_bridge.py --to 127.0.0.1:PORT [--port 5432]

It listens on the bridge's gateway address (from `docker network inspect bridge`,
or --listen), serves until interrupted, and prints where it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge: what host-gateway resolves to."""
    gateway = "{{(index .IPAM.Config 0).Gateway}}"
    done = subprocess.run(
        ["docker", "network", "inspect", "bridge", "--format", gateway],
        capture_output=True,
        text=True,
        check=False,
    )
    address = done.stdout.strip()
    if done.returncode != 0 or not address:
        why = done.stderr.strip()
        raise SystemExit(f"no Docker bridge address (is the daemon running?): {why}")
    return address


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def serve(listen: str, port: int, target: tuple[str, int]) -> None:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(forward, listen, port)
    print(f"forwarding {listen}:{port} -> {target[0]}:{target[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", required=True, help="HOST:PORT of the PostgreSQL server")
    parser.add_argument("--port", type=int, default=5432, help="the port containers connect to")
    parser.add_argument("--listen", help="address to listen on (default: the bridge's gateway)")
    args = parser.parse_args(argv)
    host, _, target_port = args.to.rpartition(":")
    if not host or not target_port.isdigit():
        parser.error(f"--to {args.to!r}: expected HOST:PORT, e.g. 127.0.0.1:5432")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen or bridge_gateway(), args.port, (host, int(target_port))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
