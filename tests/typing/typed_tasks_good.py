"""Checked by tests/test_typed_tasks.py with mypy: every call here must type-check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import pgkick
import pgkick.aio
from pgkick.connections.aio_db import AsyncConnection
from pgkick.tasks.context import JobContext


class Receipt(TypedDict):
    order: int
    email: str


@dataclass
class Refund:
    order: int
    cents: int


@pgkick.task("typing_send_receipt")
def send_receipt(payload: Receipt) -> None:
    pass


@pgkick.task("typing_refund")
def refund(payload: Refund, job: JobContext) -> None:
    pass


@pgkick.task("typing_refunds", batch=5, batch_window=2.5)
def refunds(items: list[pgkick.BatchItem[Refund]]) -> dict[int, object]:
    return {item.id: item.payload.cents for item in items}


def producer(conn: pgkick.Connection) -> None:
    refunds.enqueue_and_kick(Refund(order=3, cents=4))  # typed by the items' payload
    send_receipt.enqueue_and_kick({"order": 42, "email": "a@b.c"}, queue="mail", delay=5)
    refund.enqueue_and_kick(Refund(order=42, cents=500), max_attempts=3)
    send_receipt.enqueue_many([{"order": 1, "email": "x@y.z"}], queue="mail")
    with pgkick.transaction(conn) as jobs:
        refund.enqueue(jobs, Refund(order=7, cents=1))
    pending = pgkick.enqueue_in(conn)
    send_receipt.enqueue(pending, {"order": 8, "email": "q@r.s"})
    pending.kick()
    send_receipt({"order": 9, "email": "direct@call.test"})  # still callable as the function
    pgkick.enqueue_and_kick({"anything": True}, task="typing_send_receipt")  # string API


async def asynchronous(conn: AsyncConnection) -> list[int]:
    async with pgkick.aio.transaction(conn) as jobs:
        first: int = await send_receipt.enqueue(jobs, {"order": 1, "email": "a@b.c"})
    second = await send_receipt.enqueue_and_kick_async({"order": 2, "email": "a@b.c"})
    more = await send_receipt.enqueue_many_async([{"order": 3, "email": "a@b.c"}], queue="m")
    return [first, second, *more]
