"""PGKICK_KICKER=local: kicks handed to the local stack, `pgkick dev` (pgkick_dev.devserver).

`make_kicker` is found here through the `pgkick.kickers` entry point. In an app it is
a thin client of a running `pgkick dev` (pgkick_dev.local.client), found or started
before anything is written (pgkick_dev.local.autostart). Inside one of the stack's
execution environments the worker uses PGKICK_KICKER=lambda against the stack; only
with the fast-scheduler kindness (PGKICK_DEV_WAKE_AT_SECOND set by the stack) does it
come here, for the same Lambda kicker with wake-ups at the second (pgkick_dev.local.inside).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pgkick import config
from pgkick.kick.kickers import Kicker


def make_kicker(settings: config.Settings, env: Mapping[str, str] | None = None) -> Kicker:
    env = os.environ if env is None else env
    if env.get("PGKICK_DEV_WAKE_AT_SECOND"):  # inside a stack's environment, kindly
        from pgkick_dev.local import inside

        return inside.make(settings)
    from pgkick_dev.local.client import connect

    return connect(env)
