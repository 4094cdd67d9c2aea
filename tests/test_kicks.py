"""Kicks as Lambda's asynchronous invoke delivers them: the local stand-in keeps every event,
throttles, drops old events and cuts recursive chains as AWS does; pgkick's own hop bound
keeps a long drain alive through that cut; AWS calls are bounded in time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgkick.kick.kickers import NoKicker
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.local.context import FakeLambdaContext
from pgkick_dev.local.kicker import LOOP_LIMIT, LocalKicker
from pgkick_dev.sessions import SessionCounter
from tests.helpers import load_handler, seed
from tests.store import JobStore

ROOT = Path(__file__).parent.parent


def _local(tmp_path: Path, dsn: str, **options: Any) -> LocalKicker:
    env = {
        "DATABASE_URL": dsn,
        "PYTHONPATH": str(ROOT),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "PGKICK_WORKER_LINGER_MS": "0",
        **options.pop("env", {}),
    }
    return LocalKicker(env=env, output=tmp_path / "workers.log", **options)


@pytest.mark.parametrize("hop", [-1, "3", 1.5, True, None, 10**7, [1]])
def test_a_kick_with_a_malformed_hop_is_answered_not_raised(
    dsn: str, monkeypatch: pytest.MonkeyPatch, hop: Any
) -> None:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("PGKICK_KICKER", "none")
    with JobStore.open(dsn) as store:
        seed(store, 2)
    result = load_handler("worker").handler(
        {"queue": "default", "reason": "rekick", "hop": hop}, FakeLambdaContext()
    )
    assert "hop" in result["rejected"] and len(result["rejected"]) < 400
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pgkick.jobs WHERE status = 'queued'"
        ).fetchone() == (2,)


def test_every_event_is_kept_and_waits_for_a_free_environment(dsn: str, tmp_path: Path) -> None:
    """Catches a stand-in that merges pending kicks (Lambda never does): 6 kicks while the
    only environment is busy are 6 invocations, 5 of them throttled first."""
    # Lambda's throttle backoff (1 s doubling to 5 min), scaled down as the retries are
    sessions = SessionCounter(dsn)
    local = _local(tmp_path, dsn, concurrency=1, throttle_backoff=(0.05, 1.0))
    try:
        for _ in range(6):
            local.kick("default", "manual")
        assert local.wait_idle(60)
        assert local.stats.invocations == 6 and local.stats.cold_starts == 1
        assert local.stats.throttles == 5 and local.stats.failed_kicks == []
    finally:
        local.close()
    assert sessions.opened() == 6  # each invocation connected once (PostgreSQL's count)


def test_an_event_older_than_its_maximum_age_is_dropped(dsn: str, tmp_path: Path) -> None:
    """The first kick runs a 1 s job; the two behind it outlive their 0.2 s maximum age."""
    producer.enqueue_and_kick({"seconds": 1.0}, task="sleep", dsn=dsn, kicker=NoKicker())
    local = _local(tmp_path, dsn, concurrency=1, max_event_age=0.2)
    try:
        for _ in range(3):
            local.kick("default", "manual")
        assert local.wait_idle(60)
        assert local.stats.invocations == 1
        assert [k["why"] for k in local.stats.failed_kicks] == ["maximum event age exceeded"] * 2
    finally:
        local.close()


@pytest.mark.parametrize("allow_loops", [False, True])
def test_a_chain_of_self_invocations_is_cut_after_16_unless_loops_are_allowed(
    dsn: str, tmp_path: Path, allow_loops: bool
) -> None:
    """The stand-in follows the chain by where a kick came from (as AWS does), whatever the
    event says: a handler invoking itself 20 times is stopped at the 17th invocation."""
    local = _local(
        tmp_path,
        dsn,
        allow_loops=allow_loops,
        handler="tests.loop_handler:handler",
        env={"PGKICK_TEST_CHAIN": "20"},
    )
    try:
        local.kick("default", "manual")
        assert local.wait_idle(120)
        hops = sorted(r["hop"] for r in local.stats.results)
        if allow_loops:
            assert hops == list(range(21)) and local.stats.failed_kicks == []
        else:
            assert hops == list(range(LOOP_LIMIT))
            assert [k["why"] for k in local.stats.failed_kicks] == ["recursive loop detected"]
    finally:
        local.close()


def test_a_drain_longer_than_16_hops_completes_through_a_fresh_chain(
    dsn: str, tmp_path: Path
) -> None:
    """Catches a worker whose re-kicks keep one chain forever (AWS would cut it after 16):
    with loop detection on, 20+ short invocations drain every job and nothing is dropped."""
    local = _local(
        tmp_path,
        dsn,
        concurrency=1,
        timeout_ms=2_000,  # whole seconds, as Lambda's; the emulator counts a cold init in it
        fast_scheduler=True,  # the labelled kindness: the hand-over wake-up at the second
        env={
            "PGKICK_BATCH": "1",
            "PGKICK_MAX_FANOUT": "0",
            "PGKICK_MIN_REMAINING_MS": "1500",  # about 0.5 s of work per invocation
            "PGKICK_MAX_HOPS": "5",
        },
    )
    try:
        producer.enqueue_many(
            [{"payload": {"seconds": 0.04}, "task": "sleep"} for _ in range(300)],
            dsn=dsn,
            kicker=local,
        )
        assert local.wait_idle(300, include_wakes=True)
        assert local.stats.invocations > LOOP_LIMIT
        assert local.stats.failed_kicks == []
        assert sum(1 for r in local.stats.results if r["stopped_because"] == "time") > LOOP_LIMIT
        with psycopg.connect(dsn) as conn:
            assert conn.execute(
                "SELECT status, count(*) FROM pgkick.jobs GROUP BY 1"
            ).fetchall() == [("done", 300)]
    finally:
        local.close()


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An HTTP endpoint that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


class _WakeRecorder(LambdaKicker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wakes: list[tuple[str, datetime]] = []

    def wake_at(self, queue: str, when: datetime) -> None:
        self.wakes.append((queue, when))


def test_a_kick_to_an_endpoint_that_never_answers_returns_within_its_bound(
    dsn: str, silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """boto3's defaults held enqueue_and_kick for 180 s here; the bounded client gives up
    after 2 attempts of `timeout`, logs and counts it, keeps the job, books a wake-up for
    now (PGKICK_FAILED_KICK_WAKE_MS, 0: the scheduler's next minute), and leaves the
    queue's pending kick free for the next producer."""
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL_LAMBDA": silent_endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    kicker = _WakeRecorder("pgkick-worker", timeout=0.3)
    failures = producer.stats.kick_failures
    started = time.monotonic()
    job_id = producer.enqueue_and_kick({}, task="noop", queue="q", dsn=dsn, kicker=kicker)
    elapsed = time.monotonic() - started
    assert elapsed < 2 * 2 * 0.3 + 1.0, elapsed  # 2 attempts x (connect + read), plus slack
    assert producer.stats.kick_failures == failures + 1
    assert [q for q, _ in kicker.wakes] == ["q"]
    assert -3 <= (kicker.wakes[0][1] - datetime.now(UTC)).total_seconds() <= 0
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT status FROM pgkick.jobs WHERE id = %s", (job_id,)
        ).fetchone() == ("queued",)
        assert conn.execute("SELECT count(*) FROM pgkick.queue_watchers").fetchone() == (0,)


def test_an_answer_lambda_cannot_marshal_is_an_error_here_too(dsn: str, tmp_path: Path) -> None:
    """Catches a stand-in kinder than Lambda: an answer holding a datetime is a
    Runtime.MarshalError on AWS (then retried as a failed invocation), never a string."""
    local = _local(
        tmp_path,
        dsn,
        retry_delays=(0.0, 0.0),
        handler="tests.loop_handler:unmarshallable",
    )
    try:
        local.kick("default", "manual")
        assert local.wait_idle(60)
        errors = [r["error"] for r in local.stats.results if "error" in r]
        assert len(errors) == 3 and all(e.startswith("Runtime.MarshalError") for e in errors)
        assert [k["why"] for k in local.stats.failed_kicks] == [
            "retries exhausted (failed: " + errors[-1] + ")"
        ]
    finally:
        local.close()
