"""The dev stack's environments get ports of their own, and an invocation goes only to the
emulator of its own environment (pgkick_dev.devserver.ports says why: a bench run lost a
minute when two environments were handed one port). Real sockets, real processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgkick_dev.devserver.ports import PortTaken, free_port, taken_by_another, wait_for_own_listener
from pgkick_dev.devserver.rie_process import Environment, post

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"

LISTENER = """
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
time.sleep(60)
"""


def _process(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE)


@pytest.fixture
def foreign_listener() -> Iterator[socket.socket]:
    """A socket listening in this process: another stack's emulator, as far as a child
    process's environment can tell."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


def test_a_port_is_handed_out_once() -> None:
    """Probing port 0 again and again draws some ports twice (2,000 probes here drew 127
    again); free_port never does within a process."""
    ports = [free_port() for _ in range(3000)]
    assert len(set(ports)) == len(ports)


def test_the_process_listening_on_its_own_port_is_recognised() -> None:
    port = free_port()
    child = _process(LISTENER, str(port))
    try:
        assert child.stdout is not None and child.stdout.readline() == b"listening\n"
        assert wait_for_own_listener(child, port, timeout=10) is True
    finally:
        child.kill()
        child.wait()


def test_a_process_that_exits_before_listening_is_not_waited_for() -> None:
    child = _process("pass")
    child.wait()
    assert wait_for_own_listener(child, free_port(), timeout=10) is False


def test_an_invocation_is_never_posted_to_another_process_port(
    foreign_listener: socket.socket,
) -> None:
    """An environment whose port another process listens on (its emulator could not bind
    it) is given up: nothing is sent to the other process's emulator, which would take a
    second invocation while busy."""
    port = foreign_listener.getsockname()[1]
    rie = _process("import time; time.sleep(60)")  # alive, but listening on nothing
    environment = Environment(process=rie, port=port, id="collided")
    answers: list[object] = []
    sender = threading.Thread(target=lambda: answers.append(post(environment, b"{}", 1)))
    try:
        sender.start()
        sender.join(15)
        assert not sender.is_alive(), "post waited on another process's port"
        assert answers == [None]
        foreign_listener.settimeout(0)
        with pytest.raises(BlockingIOError):  # no connection reached the other emulator
            foreign_listener.accept()
        assert not environment.listening
    finally:
        rie.kill()
        rie.wait()


def test_pgkick_dev_on_a_busy_port_says_so_before_starting_anything(
    foreign_listener: socket.socket, tmp_path: Path
) -> None:
    """Catches `pgkick dev --port N` on a port another process holds ending in uvicorn's
    bind error and a RuntimeError traceback, after its embedded database had started."""
    from pgkick.cli.main import main

    port = foreign_listener.getsockname()[1]
    data = tmp_path / "data"
    with pytest.raises(SystemExit, match=f"127.0.0.1:{port} is in use by another process"):
        main(["dev", "--port", str(port), "--data-dir", str(data), "--template", str(TEMPLATE)])
    assert not data.exists()  # no database started


def test_a_port_taken_after_the_check_is_told_from_other_start_failures(
    foreign_listener: socket.socket,
) -> None:
    """The server's own bind is the last word (the port may be taken after the check): it
    raises PortTaken, which `pgkick dev` turns into the same sentence."""
    from starlette.applications import Starlette

    from pgkick_dev.devserver.server import ServerThread

    port = foreign_listener.getsockname()[1]
    with pytest.raises(PortTaken), ServerThread(Starlette(), "127.0.0.1", port):
        pass
    assert taken_by_another("127.0.0.1", free_port()) is False
