"""A dev server in this process, on a free port, talked to through boto3 over HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from pgkick_dev.devserver.clock import ManualClock
from pgkick_dev.devserver.queue import QueueOptions
from pgkick_dev.devserver.scheduler_delivery import LOCAL_DLQ_ARN
from pgkick_dev.devserver.server import ServerThread, make_app
from pgkick_dev.devserver.stack import FunctionSpec, Stack

ROOT = Path(__file__).parent.parent
FUNCTION = "app-worker"


@dataclass
class Running:
    stack: Stack
    url: str
    lambda_: Any
    scheduler: Any
    clock: ManualClock
    logs: list[str]

    def kinds(self, request_id: str | None = None) -> list[str]:
        return [
            e["kind"]
            for e in self.stack.timeline.events(limit=10_000)
            if request_id is None or e["request_id"] == request_id
        ]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.stack.timeline.events(limit=10_000) if e["kind"] == kind]

    def wait(self, predicate: Callable[[], bool], timeout: float = 30) -> None:
        """Until `predicate()` (real processes answer in real time), or fail."""
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, self.stack.timeline.events()
            with self.stack.lock:
                self.stack.lock.wait(0.05)


def client(service: str, url: str) -> Any:
    config = Config(retries={"total_max_attempts": 1})  # a refusal is seen, not retried
    return boto3.client(
        service,
        config=config,
        endpoint_url=url,
        region_name="us-east-1",  # type: ignore[call-overload]
        aws_access_key_id="dev",
        aws_secret_access_key="dev",
    )


@contextmanager
def dev_stack(
    handler: str = "tests.devserver_handlers:echo",
    *,
    env: dict[str, str] | None = None,
    concurrency: int = 2,
    reserved: bool = True,  # the cap is a reservation (False: the account's pool)
    freeze: bool = True,
    fast_scheduler: bool = False,
    timeout_ms: int = 30_000,
    start: float = 1_800_000_000.0,  # 2027-01-15T08:00:00Z, a whole minute
    awake: Any = None,  # an AwakeMonitor: the dashboard's timeline shows its measurements
    aliases: tuple[str, ...] = (),  # the template's AutoPublishAlias
    on_failure: bool = False,  # OnFailure to FailedKicksQueue, which the function drains
    memory_mb: int = 512,
    drain_batch: int = 5,  # the BatchSize of its SQS event source on FailedKicksQueue
    drain_retention: int = 1_209_600,  # that queue's MessageRetentionPeriod
    **options: Any,
) -> Iterator[Running]:
    clock = ManualClock(start=start)
    logs: list[str] = []
    spec = FunctionSpec(
        FUNCTION,
        handler=handler,
        concurrency=concurrency,
        reserved=reserved,
        timeout_ms=timeout_ms,
        memory_mb=memory_mb,
        aliases=aliases,
        on_failure=LOCAL_DLQ_ARN if on_failure else None,
        drains=LOCAL_DLQ_ARN if on_failure else None,
        drain_batch=drain_batch,
        drain_retention=drain_retention,
        options=QueueOptions(seed=7, **options),
    )
    stack = Stack(
        [spec],
        env={"PYTHONPATH": str(ROOT), **(env or {})},
        clock=clock,
        write_log=logs.append,
        freeze=freeze,
        fast_scheduler=fast_scheduler,
        seed=7,
    )
    try:
        with ServerThread(make_app(stack, awake=awake)) as server:
            stack.endpoint = server.url  # the environments' workers call it back
            yield Running(
                stack,
                server.url,
                client("lambda", server.url),
                client("scheduler", server.url),
                clock,
                logs,
            )
    finally:
        stack.close()
