"""Let `sam local invoke` on Linux reach a PostgreSQL that listens on 127.0.0.1 only.

Why: on Linux, a container's 127.0.0.1 is its own and `host.docker.internal` does not
resolve unless it is added (`--add-host host.docker.internal:host-gateway`, which
names the host's address on Docker's bridge). A server on the host's loopback (the
embedded one, or a default install) is not listening there, and its pg_hba.conf
admits loopback clients only. This forwards the bridge address's port to the
server's loopback port, so the server sees loopback clients and needs no change.

    uv run python infra/docker_bridge.py --to 127.0.0.1:PORT [--port 5432]

It listens on the bridge's gateway address (from `docker network inspect bridge`, or,
when the daemon reports none, as Debian's docker 20.10 does, the bridge interface's own
address; or --listen), serves until interrupted, and prints where it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import struct
import subprocess
import sys


class NoBridge(RuntimeError):
    """No address on Docker's default bridge could be found; the message says why."""


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge: what host-gateway resolves to. The
    network's gateway when the daemon reports one; else (Debian's docker 20.10 lists the
    subnet only) the address of the bridge's interface (docker0 unless renamed)."""
    template = (
        "{{range .IPAM.Config}}{{.Gateway}}{{end}} "
        '{{index .Options "com.docker.network.bridge.name"}}'
    )
    try:
        done = subprocess.run(
            ["docker", "network", "inspect", "bridge", "--format", template],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise NoBridge("no docker command on PATH") from None
    if done.returncode != 0:
        why = " ".join(done.stderr.split()) or f"docker exited {done.returncode}"
        raise NoBridge(f"docker network inspect bridge failed (is the daemon running?): {why}")
    return address_from(done.stdout)


def address_from(inspected: str) -> str:
    """The address in `docker network inspect`'s "GATEWAY INTERFACE" line: the gateway,
    or, when it is empty (" docker0"), the interface's own address."""
    gateway, _, interface = inspected.strip("\n").rpartition(" ")
    if gateway.strip():
        return gateway.strip()
    interface = interface or "docker0"
    address = interface_address(interface)
    if address is None:
        raise NoBridge(
            f"the bridge network reports no gateway and interface {interface} has no IPv4 "
            "address here (is the daemon on this host? DOCKER_HOST points elsewhere?)"
        )
    return address


def interface_address(name: str) -> str | None:
    """The IPv4 address of network interface `name` on this host (Linux), or None."""
    import fcntl  # Linux/macOS only: imported here so --listen works anywhere

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(
                probe.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15])
            )
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


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
        except OSError as error:  # said: the client sees only a closed connection
            why = error.strerror or type(error).__name__
            print(f"docker_bridge.py: cannot reach {target[0]}:{target[1]}: {why}", file=sys.stderr)
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(forward, listen, port)
    port = int(server.sockets[0].getsockname()[1])  # the one chosen, for --port 0
    print(f"forwarding {listen}:{port} -> {target[0]}:{target[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", required=True, help="HOST:PORT of the PostgreSQL server")
    parser.add_argument(
        "--port",
        type=int,
        default=5432,
        help="the port containers connect to (0: any free one, printed)",
    )
    parser.add_argument("--listen", help="address to listen on (default: the bridge's gateway)")
    args = parser.parse_args(argv)
    host, _, target_port = args.to.rpartition(":")
    if not host or not target_port.isdigit():
        parser.error(f"--to {args.to!r}: expected HOST:PORT, e.g. 127.0.0.1:5432")
    try:
        listen = args.listen or bridge_gateway()
    except NoBridge as error:
        print(f"docker_bridge.py: no Docker bridge address: {error}", file=sys.stderr)
        return 1
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listen, args.port, (host, int(target_port))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
