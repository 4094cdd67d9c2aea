"""A tiny app with its own pgkick task, for the testing-mode example (README, test_testing)."""

from __future__ import annotations

from typing import TypedDict

import pgkick


class Receipt(TypedDict):
    order: int
    email: str


SENT: list[Receipt] = []  # the app's "mail server"


@pgkick.task("example_send_receipt")
def send_receipt(receipt: Receipt) -> None:
    if "@" not in receipt["email"]:
        raise pgkick.PermanentError(f"no address in {receipt['email']!r}")
    SENT.append(receipt)


def checkout(conn: pgkick.Connection, order: int, email: str) -> None:
    """The app's own code: the order and its receipt job commit together."""
    with pgkick.transaction(conn) as jobs:
        conn.execute("INSERT INTO orders (id) VALUES (%s)", (order,))
        send_receipt.enqueue(jobs, {"order": order, "email": email})
