"""Bench item `delayed_bookings`: what 10,000 delayed jobs over 10,000 distinct minutes cost.

Why: issue #30's third defect. A producer used to make one CreateSchedule call per
distinct minute, one after another, after its commit (10,000 calls: a minute or more
holding the caller), and pruned its booked set on every call. Now the wake-ups are noted
and booked by a background thread (pgkick.kick.bookings). Measured here against the local
stack's Scheduler API over HTTP (boto3, as on AWS): the producer's time after its commit
(the enqueue_many with the Lambda kicker, less the same enqueue with no kicker), the
Scheduler calls made and the distinct minutes, and how long the background took to book
them all. Targets: blocked <= 1 s after the commit; calls <= distinct minutes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config

from pgkick.kick.kickers import NoKicker
from pgkick.kick.lambda_kicker import LambdaKicker
from pgkick.producer import enqueue as producer
from pgkick_dev.devserver.clock import ManualClock
from pgkick_dev.devserver.server import ServerThread, make_app
from pgkick_dev.devserver.stack import FunctionSpec, Stack

FUNCTION = "pgkick-bench-worker"
ARN = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
ROLE = "arn:aws:iam::123456789012:role/pgkick-bench"


def run(
    dsn: str,
    jobs: int,
    reset: Callable[[], None],
    say: Callable[[str], None],
    *,
    throttle_rate: float = 0.0,
) -> dict[str, Any]:
    """Enqueue `jobs` delayed jobs, each in its own minute, in one enqueue_many.
    throttle_rate: the share of CreateSchedule calls the stack throttles (retried)."""
    base = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=2)
    batch = [
        {"payload": {"n": n}, "task": "noop", "run_at": base + timedelta(minutes=n)}
        for n in range(jobs)
    ]
    reset()
    started = time.perf_counter()
    producer.enqueue_many(batch, dsn=dsn, kicker=NoKicker())
    commit_only = time.perf_counter() - started
    reset()
    # The stack's scheduler on a clock that never moves: it keeps the schedules as AWS does,
    # without a timer thread for each of them.
    stack = Stack([FunctionSpec(FUNCTION)], clock=ManualClock(start=time.time()))
    stack.scheduler.faults.api_throttle_rate = throttle_rate
    try:
        with ServerThread(make_app(stack)) as server:
            client = boto3.client(
                "scheduler",
                endpoint_url=server.url,
                region_name="us-east-1",
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
                config=Config(retries={"total_max_attempts": 1}),
            )
            kicker = LambdaKicker(
                FUNCTION, function_arn=ARN, scheduler_role_arn=ROLE, scheduler_client=client
            )
            started = time.perf_counter()
            producer.enqueue_many(batch, dsn=dsn, kicker=kicker)
            with_kicker = time.perf_counter() - started
            flushed = kicker.flush(600)
            booked_after = time.perf_counter() - started
            schedules = len(stack.scheduler.list())
    finally:
        stack.close()
        reset()
    result = {
        "jobs": jobs,
        "throttle_rate": throttle_rate,
        "distinct_minutes": jobs,
        "scheduler_calls": kicker.wakes.stats.calls,
        "schedules_made": schedules,
        "booking_failures": kicker.wakes.stats.failures,
        "throttle_retries": kicker.background_backoff.retries,
        "enqueue_commit_only_s": round(commit_only, 3),
        "enqueue_with_bookings_s": round(with_kicker, 3),
        "producer_blocked_after_commit_s": round(max(0.0, with_kicker - commit_only), 3),
        "all_booked_after_s": round(booked_after, 1),
        "all_booked": flushed,
    }
    say(f"delayed_bookings: {result}")
    return result
