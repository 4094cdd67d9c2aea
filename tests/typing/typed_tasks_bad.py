"""Checked by tests/test_typed_tasks.py with mypy: each line marked E: must be an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import pgkick
import pgkick.aio
from pgkick.connections.aio_db import AsyncConnection


class Receipt(TypedDict):
    order: int
    email: str


@dataclass
class Refund:
    order: int
    cents: int


@pgkick.task("typing_bad_receipt")
def send_receipt(payload: Receipt) -> None:
    pass


@pgkick.task("typing_bad_refund")
def refund(payload: Refund) -> None:
    pass


@pgkick.task("typing_bad_refunds", batch=5)
def refunds(items: list[pgkick.BatchItem[Refund]]) -> None:
    pass


def producer(conn: pgkick.Connection) -> None:
    refunds.enqueue_and_kick({"order": 42, "cents": 5})  # E: a batch task's items' type
    send_receipt.enqueue_and_kick({"order": "42", "email": "a@b.c"})  # E: wrong field type
    send_receipt.enqueue_and_kick({"order": 42})  # E: missing field
    refund.enqueue_and_kick({"order": 42, "cents": 5})  # E: a dict, not the dataclass
    refund.enqueue_and_kick(Refund(order=1, cents=2), queue=3)  # E: bad option type
    send_receipt.enqueue_many([Refund(order=1, cents=2)])  # E: another task's payload
    with pgkick.transaction(conn) as jobs:
        refund.enqueue(jobs, {"order": 7})  # E: a dict into the dataclass task


async def asynchronous(conn: AsyncConnection) -> None:
    async with pgkick.aio.transaction(conn) as jobs:
        job_id: int = send_receipt.enqueue(jobs, {"order": 1, "email": "a@b.c"})  # E: no await
        send_receipt.enqueue(jobs, {"order": 2, "email": "a@b.c"})  # E: unused coroutine
    send_receipt.enqueue_and_kick_async({"order": 3, "email": "a@b.c"})  # E: unused coroutine
    await send_receipt.enqueue_and_kick_async({"order": 4})  # E: missing field
    print(job_id)
