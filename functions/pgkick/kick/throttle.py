"""AWS calls retried when AWS throttles them, with jittered backoff, within a time budget.

Why: EventBridge Scheduler throttles CreateSchedule per account (1,000 to 5,000 TPS in large
regions, 250 elsewhere) and per schedule (a fixed 10 TPS: producers booking the same
minute's wake-up hit it at once). A throttled booking used to be counted and forgotten, and
its job waited for the daily reaper. botocore's own retry (one, in `aws_client`) is far too
short for that. Retries here wait a random time up to a doubling ceiling ("full jitter"), so
racing callers spread out instead of colliding again, and stop at a budget: a caller on a
commit path is never held long (its work is committed; the sweep of pgkick.worker.healing or
the reaper books again what a budget gave up on).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

THROTTLED = frozenset({"ThrottlingException", "TooManyRequestsException"})


def error_code(exc: BaseException) -> str | None:
    """The AWS error code botocore put on `exc` (ClientError.response), or None."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


class Backoff:
    """How throttled calls are retried: first ceiling, cap, and the whole budget (seconds).

    A plain class, as are the worker's other stateful helpers (its watch, booker counters,
    sweep and SQS batch tallies): a dataclass is made at import, 0.4 to 0.9 ms each here
    (Python 3.12 compiles its __init__, __repr__ and __eq__), and these are on every cold
    start's path to its claim (docs/performance.md, "Records evaluate their annotations")."""

    __slots__ = ("base", "budget", "cap", "gave_up", "monotonic", "rand", "retries", "sleep")

    def __init__(
        self,
        base: float = 0.2,  # a schedule's 10 TPS frees within the second: reach it in a few tries
        cap: float = 1.0,
        budget: float = 3.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        rand: random.Random | None = None,
    ) -> None:
        self.base, self.cap, self.budget = base, cap, budget
        self.sleep, self.monotonic = sleep, monotonic
        self.rand = rand or random.Random()
        self.retries = 0  # throttled calls retried, over this object's life (for reports)
        self.gave_up = 0  # calls still throttled when the budget ran out

    def call[T](self, call: Callable[[], T]) -> T:
        """`call()`, retried while AWS throttles it and the budget allows; its error then."""
        started = self.monotonic()
        attempt = 0
        while True:
            try:
                return call()
            except Exception as exc:
                if error_code(exc) not in THROTTLED:
                    raise
                pause = self.rand.uniform(0, min(self.cap, self.base * 2**attempt))
                if self.monotonic() - started + pause > self.budget:
                    self.gave_up += 1
                    raise
                attempt += 1
                self.retries += 1
                self.sleep(pause)


def retried(backoff: Backoff, function: Callable[..., Any], **kwargs: Any) -> Any:
    """function(**kwargs) through `backoff` (a boto3 client method and its parameters)."""
    return backoff.call(lambda: function(**kwargs))
