"""The app's tasks. The worker imports this module because PGKICK_TASKS names it
(template.yaml's TaskModules), which runs the `@pgkick.task` decorators."""

from __future__ import annotations

from typing import Any

import pgkick


@pgkick.task("send_receipt")
def send_receipt(payload: Any, job: pgkick.JobContext) -> None:
    """Pretend to e-mail a receipt; a real one passes job.idempotency_key to the mailer."""
    if not isinstance(payload.get("order"), int):
        raise pgkick.PermanentError(f"send_receipt needs an integer order, got {payload!r}")
    print(f"receipt for order {payload['order']} (key {job.idempotency_key})")
