"""`sam local invoke` and `sam local start-lambda`, run for real: Docker (this run's own
daemon where none answers: tests/docker_daemon.py), the stand-in base image built from
this machine's files (infra/lambda_image.py), this machine's build (infra/sam_local.py),
the database through infra/docker_bridge.py on the bridge address.

`sam local invoke` exits 0 when the handler fails, so every run here is judged by the
job rows in the database or by the answer's own shape, never by SAM's exit code.
Skipped (reason printed) where Docker is not installed, unless PGKICK_REQUIRE_DOCKER
is set (.ci/run): then that fails."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from psycopg.conninfo import conninfo_to_dict

from infra import docker_bridge, image_files, lambda_image, sam_local
from infra.sam_local_env import (
    Forwarder,
    container_dsn,
    declared_variables,
    sam_environment,
    write_env_file,
)
from tests.docker_daemon import docker_daemon, unavailable
from tests.helpers import job_row, seed
from tests.sam import ROOT, ensure_sam_venv, uv
from tests.sam_local_run import (
    accepts,
    answer,
    free_port,
    lambda_client,
    sam_invoke,
    statuses,
    until_done,
)
from tests.store import JobStore

EVENTS = ROOT / "infra" / "events"
EXAMPLE = ROOT / "examples" / "orders"


@pytest.fixture(scope="session")
def daemon() -> Iterator[str | None]:
    with docker_daemon() as host:
        yield host


@pytest.fixture(scope="session")
def stand_in(daemon: str | None) -> str:
    """The stand-in image, built once per run (a no-op when the daemon has it already)."""
    ensure_sam_venv()  # the emulator binary the image carries comes with aws-sam-cli
    if not image_files.BUSYBOX.exists():
        unavailable("busybox-static is not installed")
    tag = lambda_image.default_tag()
    lambda_image.build(tag)
    return tag


@pytest.fixture(scope="session")
def built(stand_in: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """infra/sam_local.py's build of template.yaml for this machine's architecture."""
    out = tmp_path_factory.mktemp("sam-local") / "build"
    return sam_local.build(ROOT / "template.yaml", out, lambda_image.machine_architecture())


@pytest.fixture(scope="session")
def forwarder(daemon: str | None, server_dsn: str) -> Iterator[Forwarder]:
    """The test server, reached from containers at the bridge address (one port)."""
    with Forwarder(server_dsn) as running:
        yield running


def test_env_linux_json_differs_from_env_json_only_in_the_address() -> None:
    """The Linux env file is the other one with the database reached through the bridge
    (and a connect timeout): catches the two drifting apart in anything else."""
    default = json.loads((ROOT / "infra" / "env.json").read_text())
    linux = json.loads((ROOT / "infra" / "env.linux.json").read_text())
    url = linux["Parameters"].pop("DATABASE_URL")
    default["Parameters"].pop("DATABASE_URL")
    assert linux == default
    assert urlsplit(url).hostname == "host.docker.internal" and urlsplit(url).port == 5432


def test_container_dsn_keeps_a_key_value_dsns_database_and_credentials() -> None:
    """The tests' DSNs are key=value: catches a URL-only parser (port None, no dbname)."""
    dsn = "host=127.0.0.1 port=5999 dbname=t_abc user=postgres password='p@ss word'"
    url = container_dsn(dsn, 41000)
    assert url == (
        "postgresql://postgres:p%40ss%20word@host.docker.internal:41000/t_abc?connect_timeout=5"
    )


def test_container_dsn_keeps_the_dsns_other_options() -> None:
    """sslmode and options reach the container as given (they were dropped: the container
    ran with libpq's defaults, a verify-full silently weakened); its own timeout wins."""
    dsn = "postgresql://u:p@db.example:5432/app?sslmode=verify-full&options=-c%20x%3D1"
    url = container_dsn(dsn, 41000)
    parts = conninfo_to_dict(url)
    assert (parts["host"], parts["port"], parts["dbname"], parts["user"]) == (
        "host.docker.internal",
        "41000",
        "app",
        "u",
    )
    assert (parts["sslmode"], parts["options"], parts["connect_timeout"]) == (
        "verify-full",
        "-c x=1",
        "5",
    )
    assert conninfo_to_dict(container_dsn(dsn + "&connect_timeout=2", 1))["connect_timeout"] == "2"


def test_sam_gets_none_of_the_shells_values_for_the_templates_variables() -> None:
    """SAM passes the caller's value of each variable the template declares into the
    container: a developer's PGKICK_TASKS=pgkick_dev.tasks made the worker fail to import."""
    shell = {"PGKICK_TASKS": "pgkick_dev.tasks", "DATABASE_URL": "x", "HOME": "/root"}
    env = sam_environment(ROOT / "template.yaml", shell)
    assert {"PGKICK_TASKS", "DATABASE_URL", "PGKICK_KICKER"} <= declared_variables(
        ROOT / "template.yaml"
    )
    assert "PGKICK_TASKS" not in env and "DATABASE_URL" not in env and env["HOME"] == "/root"


@pytest.fixture
def refused_early(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sam_local.main() where the daemon, the image and the build must not be reached (a
    refusal comes first), and with this process's SIGTERM handler left as it was."""

    def prepare(args: object) -> None:
        raise AssertionError("reached the image and the build before refusing")

    monkeypatch.setattr(sam_local, "prepare", prepare)
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        ("localhost:5432/postgres", 'malformed DSN: missing "=" after "localhost:5432/postgres"'),
        ("postgresql://postgres@127.0.0.1:fivefour/postgres", "port 'fivefour' is not a number"),
    ],
)
def test_a_malformed_dsn_is_refused_in_one_line_before_the_build(
    refused_early: None, capsys: pytest.CaptureFixture[str], dsn: str, said: str
) -> None:
    """A DSN without its scheme (a common typo) ended in a psycopg traceback, and only
    after the image check and half a minute of `sam build`."""
    assert sam_local.main(["invoke", "--dsn", dsn]) == 1
    error = capsys.readouterr().err
    assert error.startswith("sam_local.py: ") and said in error, error


def test_a_database_nobody_answers_is_refused_before_the_build(
    refused_early: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong port in the DSN ran the image check and `sam build` first; then the
    container failed naming the forwarder's bridge address and "the server terminated
    abnormally" (the forwarder dropped the connection it could not pass on)."""
    port = free_port()  # nothing listens there
    dsn = f"host=127.0.0.1 port={port} user=postgres password=s3cret-pw"
    assert sam_local.main(["invoke", "--dsn", dsn]) == 1
    error = capsys.readouterr().err
    assert f"nothing accepts connections at 127.0.0.1:{port}" in error, error
    assert "s3cret-pw" not in error


def test_start_lambda_on_a_busy_port_is_refused_before_the_build(
    refused_early: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """SAM said the port was in use only after the image check, `sam build` and the
    forwarder; meanwhile the page's wait loop (a connect to the port) saw the other
    program answer. The listener here also stands for the database (it accepts)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        dsn = f"host=127.0.0.1 port={port} user=postgres"
        assert sam_local.main(["start-lambda", "--port", str(port), "--dsn", dsn]) == 1
    error = capsys.readouterr().err
    assert f"127.0.0.1:{port} is in use by another process" in error, error


def test_a_missing_sam_venv_is_said_in_one_line_before_anything(
    refused_early: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """With --image (AWS's, the page's "With internet" path) the stand-in's own check for
    .venv-sam is skipped, and `sam build` ended in a FileNotFoundError traceback."""
    monkeypatch.setattr(sam_local, "SAM", tmp_path / ".venv-sam" / "bin" / "sam")
    assert sam_local.main(["build", "--image", "public.ecr.aws/lambda/python:3.12-x86_64"]) == 1
    error = capsys.readouterr().err
    assert "sam is missing" in error and "infra/sam-requirements.txt" in error, error


def test_the_forwarder_says_when_it_cannot_reach_the_server() -> None:
    """A server gone after the start: the client's connection is closed, and the
    forwarder says why on stderr (it closed it in silence: "terminated abnormally")."""
    port = free_port()
    argv = [sys.executable, str(ROOT / "infra" / "docker_bridge.py"), "--listen", "127.0.0.1"]
    argv += ["--port", "0", "--to", f"127.0.0.1:{port}"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        listen = process.stdout.readline().split()[1].rpartition(":")[2]
        with socket.create_connection(("127.0.0.1", int(listen)), timeout=10) as client:
            assert client.recv(1) == b""  # closed by the forwarder, after it said why
    finally:
        process.terminate()
        said = process.communicate(timeout=10)[1]
    assert f"cannot reach 127.0.0.1:{port}" in said, said


def test_bridge_address_falls_back_to_the_interface(daemon: str | None) -> None:
    """Debian's docker 20.10 reports the bridge's subnet and no gateway: the address is
    then the bridge interface's own; without a daemon, a RuntimeError says why."""
    address = docker_bridge.bridge_gateway()  # what this daemon reports, either way
    assert docker_bridge.address_from(" docker0\n") == address  # 20.10 on a fresh host
    assert docker_bridge.address_from("172.17.0.1 docker0\n") == "172.17.0.1"
    with pytest.raises(docker_bridge.NoBridge, match="no-such-if0 has no IPv4 address"):
        docker_bridge.address_from(" no-such-if0\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        with pytest.raises(docker_bridge.NoBridge, match=r"daemon running\?\): \S"):
            docker_bridge.bridge_gateway()


def test_sam_local_invoke_worker_drains_real_jobs(
    built: Path,
    stand_in: str,
    forwarder: Forwarder,
    dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """WorkerFunction, in the stand-in image, drains 20 jobs: catches a build the image
    cannot load, a container that cannot reach the database, and the shell's
    PGKICK_TASKS reaching the container (set here; the worker would fail to import it).
    And no Powertools UserWarning: the env files' POWERTOOLS_LOG_LEVEL=DEBUG printed two
    per invoke, and changed nothing (SAM's AWS_LAMBDA_LOG_LEVEL, INFO, comes first)."""
    monkeypatch.setenv("PGKICK_TASKS", "pgkick_dev.tasks")
    with JobStore.open(dsn) as store:
        seed(store, 20)
    env_file = write_env_file(tmp_path / "env.json", container_dsn(dsn, forwarder.port))
    done = sam_invoke(built, stand_in, "WorkerFunction", EVENTS / "kick.json", env_file)
    assert statuses(dsn) == [("done", 20)], done.stdout[-2000:] + done.stderr[-4000:]
    assert answer(done)["done"] == 20
    assert "UserWarning" not in done.stderr, done.stderr[-4000:]


def test_sam_local_invoke_reaper_requeues_an_expired_lease(
    built: Path, stand_in: str, forwarder: Forwarder, dsn: str, tmp_path: Path
) -> None:
    """ReaperFunction re-queues the job whose lease expired, leaves the running one, and
    answers its report through Lambda's marshaller (timestamps as strings)."""
    with JobStore.open(dsn) as store:
        expired, running = seed(store, 2)
        store.claim("default", batch=2, lease=timedelta(minutes=10))
        store.conn.execute(
            "UPDATE pgkick.jobs SET locked_until = now() - interval '1 second' WHERE id = %s",
            (expired,),
        )
    env_file = write_env_file(tmp_path / "env.json", container_dsn(dsn, forwarder.port))
    done = sam_invoke(built, stand_in, "ReaperFunction", EVENTS / "reaper.json", env_file)
    assert job_row(dsn, expired)["status"] == "queued", done.stderr[-4000:]
    assert job_row(dsn, running)["status"] == "running"
    report = answer(done)
    assert report["requeued"] == 1 and isinstance(report["queues"][0]["next_lease_expiry"], str)


def test_sam_local_invoke_fails_in_lambdas_error_shape(
    built: Path, stand_in: str, forwarder: Forwarder, tmp_path: Path
) -> None:
    """A database that does not answer is an invocation error in Lambda's shape (what
    makes Lambda retry the kick), though `sam local invoke` itself exits 0."""
    nothing = container_dsn("user=postgres dbname=nothing", 1)
    env_file = write_env_file(tmp_path / "env.json", nothing)
    done = sam_invoke(built, stand_in, "WorkerFunction", EVENTS / "kick.json", env_file)
    error = answer(done)
    assert error["errorType"] == "DatabaseUnavailable", error
    assert error["errorMessage"] and "stackTrace" in error


@pytest.fixture
def start_lambda(
    built: Path, stand_in: str, forwarder: Forwarder, dsn: str, tmp_path: Path
) -> Iterator[str]:
    """`sam local start-lambda` serving both functions against this test's database;
    yields its endpoint once it accepts connections."""
    env_file = write_env_file(tmp_path / "env.json", container_dsn(dsn, forwarder.port))
    port = free_port()
    argv = [*sam_local.sam_argv("start-lambda", built, env_file, stand_in), "--port", str(port)]
    log = (tmp_path / "start-lambda.log").open("w")
    process = subprocess.Popen(
        argv, env=sam_environment(built), cwd=built.parent, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while not accepts(port):
            assert process.poll() is None and time.monotonic() < deadline, (
                tmp_path / "start-lambda.log"
            ).read_text()[-3000:]
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_start_lambda_serves_boto3_invoke_sync_and_event(start_lambda: str, dsn: str) -> None:
    """boto3's invoke against start-lambda: RequestResponse answers 200 with the drain's
    summary, Event answers 202 and the worker still drains the jobs it was kicked for."""
    client = lambda_client(start_lambda)
    with JobStore.open(dsn) as store:
        seed(store, 5)
    sync = client.invoke(FunctionName="WorkerFunction", Payload=(EVENTS / "kick.json").read_bytes())
    assert sync["StatusCode"] == 200 and "FunctionError" not in sync
    assert json.loads(sync["Payload"].read())["done"] == 5
    assert statuses(dsn) == [("done", 5)]
    with JobStore.open(dsn) as store:
        seed(store, 3)
    kicked = client.invoke(
        FunctionName="WorkerFunction",
        InvocationType="Event",
        Payload=(EVENTS / "kick.json").read_bytes(),
    )
    assert kicked["StatusCode"] == 202
    assert until_done(dsn, 8) == [("done", 8)]


def test_pgkicks_lambda_kicker_kicks_a_start_lambda_worker(start_lambda: str, dsn: str) -> None:
    """`pgkick enqueue` with PGKICK_KICKER=lambda and AWS_ENDPOINT_URL_LAMBDA at
    start-lambda: the job is committed, the kick is the Lambda kicker's own async invoke,
    and the worker container it starts finishes the job."""
    env = {
        **os.environ,
        "PGKICK_KICKER": "lambda",
        "PGKICK_WORKER_FUNCTION": "WorkerFunction",
        "AWS_ENDPOINT_URL_LAMBDA": start_lambda,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    pgkick = Path(sys.executable).parent / "pgkick"
    argv = [str(pgkick), "enqueue", "noop", "--dsn", dsn, "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert until_done(dsn, 1) == [("done", 1)], done.stdout + done.stderr


@pytest.fixture(scope="session")
def example_built(stand_in: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example app (examples/orders) as its README builds it for `sam local`: a copy
    with pgkick's wheel in app/vendor, built by infra/sam_local.py for this machine."""
    app = tmp_path_factory.mktemp("example-local") / "orders"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("vendor", ".aws-sam"))
    wheel = subprocess.run(
        [*uv(), "build", "-q", "--wheel", "--out-dir", str(app / "app" / "vendor"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert wheel.returncode == 0, wheel.stderr
    out = app / ".aws-sam" / "local"
    return sam_local.build(app / "template.yaml", out, lambda_image.machine_architecture())


def test_sam_local_invoke_runs_the_example_apps_own_task(
    example_built: Path, stand_in: str, forwarder: Forwarder, dsn: str, tmp_path: Path
) -> None:
    """The example's worker, in the stand-in image, runs the app's `send_receipt` task:
    catches the app's module or pgkick's wheel missing from its lean build, or a build
    for another architecture than the image's."""
    with JobStore.open(dsn) as store:
        store.conn.execute(
            "INSERT INTO pgkick.jobs (queue, task, payload) VALUES ('default', 'send_receipt', %s)",
            [json.dumps({"order": 42})],
        )
    env_file = write_env_file(tmp_path / "env.json", container_dsn(dsn, forwarder.port))
    done = sam_invoke(example_built, stand_in, "WorkerFunction", EVENTS / "kick.json", env_file)
    assert statuses(dsn) == [("done", 1)], done.stdout[-2000:] + done.stderr[-4000:]
    assert "receipt for order 42" in done.stderr + done.stdout


def test_the_stand_in_images_hash_reads_a_clones_files_by_content(tmp_path: Path) -> None:
    """Two clones on one Docker daemon install the same awslambdaric at other times: with
    mtimes in the hash each rebuilt the other's image at every run. A clone's own files
    now count by their bytes; a change to them still rebuilds."""
    import os

    clones = []
    for n, mtime in ((1, 1_000_000_000), (2, 2_000_000_000)):
        clone = tmp_path / f"clone{n}"
        source = clone / ".venv" / "awslambdaric" / "bootstrap.py"
        source.parent.mkdir(parents=True)
        source.write_text("print('runtime client')\n")
        os.utime(source, ns=(mtime, mtime))
        clones.append((clone, source))
    hashes = [
        lambda_image.content_hash([image_files.Entry("var/runtime/bootstrap.py", source=s)], c)
        for c, s in clones
    ]
    assert hashes[0] == hashes[1]
    clone, source = clones[1]
    source.write_text("print('another runtime client')\n")
    changed = lambda_image.content_hash([image_files.Entry("x", source=source)], clone)
    assert changed != lambda_image.content_hash(
        [image_files.Entry("x", source=clones[0][1])], clones[0][0]
    )
