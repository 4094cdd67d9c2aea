"""`pgkick bench` item `producer_threads`: single enqueues from 1, 4, 8 and 16 threads at once.

Why: a web server calls `enqueue_and_kick` from many request threads of one
process. What matters is the rate with threads against one thread's, and how
many database sessions the process opened to get it (on a serverless database
each one is a TLS + SCRAM handshake and a session). Commits are durable here
(synchronous_commit on, whatever the server's default): a commit's wait for the
disk is what grouping concurrent enqueues into one commit can share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgkick.connections import linger
from pgkick.connections.db import Database
from pgkick.kick.kickers import NoKicker
from pgkick.producer import enqueue as producer
from pgkick_dev import queries as dev_queries

THREADS = (1, 4, 8, 16)


def durable(dsn: str) -> str:
    """The DSN with synchronous_commit on for its sessions (a test server may turn it off)."""
    options = conninfo_to_dict(dsn).get("options") or ""
    return make_conninfo(dsn, options=f"{options} -c synchronous_commit=on".strip())


def run(dsn: str, per_thread: int, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """One row per thread count: jobs/s, sessions opened, each job inserted exactly once."""
    rows = [measure(dsn, threads, per_thread) for threads in THREADS]
    base = rows[0]["jobs_per_s"] or 1
    for row in rows:
        row["versus_one_thread"] = round(row["jobs_per_s"] / base, 2)
        say(f"producer threads: {row}")
    return rows


def measure(dsn: str, threads: int, per_thread: int) -> dict[str, Any]:
    with Database.open(dsn, application_name="pgkick-bench") as store:
        store.execute(dev_queries.JOB_TRUNCATE_ALL)
        store.execute(dev_queries.QUEUE_WATCHERS_CLEAR)
    target = durable(dsn)
    linger.close_all()  # each count starts cold: no connection left from the last one
    start = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def enqueue() -> None:
        start.wait()
        try:
            for n in range(per_thread):
                producer.enqueue_and_kick({"n": n}, task="noop", dsn=target, kicker=NoKicker())
        except BaseException as exc:  # reported below: a failed call must not pass unseen
            errors.append(exc)

    workers = [threading.Thread(target=enqueue) for _ in range(threads)]
    for worker in workers:
        worker.start()
    opened_before = linger.opened_total()  # the producer's own, not another item's threads
    start.wait()
    started = time.monotonic()
    for worker in workers:
        worker.join()
    seconds = time.monotonic() - started
    opened = linger.opened_total() - opened_before
    linger.close_all()
    if errors:
        raise RuntimeError(f"{len(errors)} enqueues failed, first: {errors[0]!r}")
    jobs = threads * per_thread
    with Database.open(dsn, application_name="pgkick-bench") as store:
        counts = store.rows(dev_queries.JOB_COUNT_BY_STATUS)
    stored = sum(int(row[1]) for row in counts)
    return {
        "threads": threads,
        "jobs": jobs,
        "seconds": round(seconds, 3),
        "jobs_per_s": round(jobs / seconds),
        "sessions_opened": opened,
        "exactly_once": stored == jobs,
    }
