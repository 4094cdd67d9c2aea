"""The worker's kicker inside a stack's environment when schedules fire at the second.

Why it exists: with the stack's labelled kindness `--fast-scheduler` (the demo, and
the tests that cannot wait a minute for a wake-up), a wake-up must be booked at its
own second, and LambdaKicker books the whole minute, as AWS needs. So this is
LambdaKicker, kicks and all, over boto3 and HTTP to the stack like any worker on
Lambda, except that a wake-up or a rescue is booked at its second, named as the
stack's fast scheduler names them. Without that kindness the environments use
PGKICK_KICKER=lambda itself (pgkick_dev.devserver.stack.Stack.runtime_env).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from pgkick import config
from pgkick.kick.kickers import kick_event, schedule_name
from pgkick.kick.lambda_kicker import LambdaKicker


class SecondWakeKicker(LambdaKicker):
    """LambdaKicker with wake-ups and rescues booked at their second (a kindness)."""

    def wake_at(self, queue: str, when: datetime) -> None:
        at = _second(when)
        name = f"{schedule_name(queue, at)}{at:%S}"
        self._schedule(name, at, kick_event(queue, "wake"), self.backoff)

    def book_rescue(self, queue: str, when: datetime, name: str) -> None:
        self._schedule(name, _second(when), kick_event(queue, "rescue"), self.backoff)


def _second(when: datetime) -> datetime:
    return datetime.fromtimestamp(math.ceil(when.timestamp()), UTC)


def make(settings: config.Settings) -> SecondWakeKicker:
    """Built from the settings as pgkick.kick.default builds a LambdaKicker."""
    return SecondWakeKicker.from_settings(settings)
