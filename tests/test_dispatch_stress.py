"""A randomized stress of the kick protocol: several producer processes trickle single
enqueues, the faithful local kicker runs the workers, random workers are SIGKILLed, and a
reaper runs alongside. Every committed job must end done, and no job may run twice at once."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import psycopg

from pgkick.worker.reaper import reap
from pgkick_dev.local.kicker import FUNCTION, LocalKicker
from tests.store import JobStore

ROOT = Path(__file__).parent.parent
PRODUCERS, JOBS_EACH, KILLS = 3, 100, 4


def _spans(folder: Path) -> dict[int, list[tuple[int, int]]]:
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for path in folder.glob("*.spans"):
        for line in path.read_text().splitlines():
            job_id, _, start, end = map(int, line.split())
            spans[job_id].append((start, end))
    return spans


def test_producers_kills_and_a_reaper_every_committed_job_done_none_twice_at_once(
    dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(os.environ.get("PGKICK_STRESS_SEED", "11"))
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {
        "DATABASE_URL": dsn,
        "PGKICK_TASKS": "tests.record_tasks",
        "PGKICK_TEST_RECORD": str(runs),
        "PYTHONPATH": str(ROOT),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "PGKICK_LEASE_SECONDS": "1",
        "PGKICK_LEASE_MARGIN_SECONDS": "1",
        "PGKICK_WORKER_LINGER_MS": "200",
        "PGKICK_BATCH": "5",
    }
    local = LocalKicker(
        env=env,
        concurrency=3,
        timeout_ms=3_000,
        idle_seconds=1.0,
        retry_delays=(0.2, 0.4),
        throttle_backoff=(0.05, 1.0),  # Lambda's backoff, scaled down as the retries are
        fast_scheduler=True,  # the labelled kindness: wake-ups at the second, not the minute
        output=tmp_path / "workers.log",
    )
    producers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.stress_producer", str(JOBS_EACH), str(seed)],
            env={
                **os.environ,
                **env,
                # the producers kick the test's stack as an app kicks Lambda: boto3, HTTP
                "PGKICK_KICKER": "lambda",
                "PGKICK_WORKER_FUNCTION": FUNCTION,
                "AWS_ENDPOINT_URL_LAMBDA": local.url,
                "AWS_ENDPOINT_URL_SCHEDULER": local.url,
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "dev",
                "AWS_SECRET_ACCESS_KEY": "dev",
            },
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        for seed in range(PRODUCERS)
    ]
    killed = 0
    try:
        while any(p.poll() is None for p in producers):  # kill busy workers meanwhile
            time.sleep(rng.uniform(0.05, 0.3))
            busy = local.processes()
            if busy and killed < KILLS:
                os.kill(rng.choice(busy), signal.SIGKILL)
                killed += 1
        assert killed >= 1, "no worker was busy to kill: the stress did not stress"
        committed = {int(line) for p in producers for line in p.communicate()[0].split()}
        assert all(p.returncode == 0 for p in producers)
        assert len(committed) == PRODUCERS * JOBS_EACH

        # The reaper re-queues what the kills left leased and kicks for it. It kicks for
        # ready jobs only if Lambda dropped an event (three deaths in a row): that is the
        # one case the protocol leaves to a backstop (pgkick.kick.watch). Any other job the
        # protocol stranded stays queued and fails the test.
        deadline = time.monotonic() + 90
        with JobStore.open(dsn) as store:
            while time.monotonic() < deadline:
                statuses = dict(store.rows("SELECT status, count(*) FROM pgkick.jobs GROUP BY 1"))
                if statuses == {"done": len(committed)}:
                    break
                if local.stats.failed_kicks:
                    reap(store, local, retention=timedelta(days=1))
                else:
                    for queue in sorted({job.queue for job in store.reap_expired()}):
                        local.kick(queue, "reaper")
                local.wait_idle(1.0)
        assert statuses == {"done": len(committed)}, statuses
        with psycopg.connect(dsn) as conn:
            done = {
                row[0] for row in conn.execute("SELECT id FROM pgkick.jobs WHERE status = 'done'")
            }
        assert done == committed

        for job_id, spans in _spans(runs).items():  # re-runs after a kill: one after another
            spans.sort()
            overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
            assert not overlaps, (job_id, overlaps)
        assert set(_spans(runs)) == committed
        # One invocation per burst, not per job: far fewer invocations than jobs.
        assert local.stats.invocations < len(committed) / 4, local.stats
    finally:
        for p in producers:
            if p.poll() is None:
                p.kill()
        local.close()
