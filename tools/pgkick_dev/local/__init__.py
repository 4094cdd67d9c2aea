"""PGKICK_KICKER=local: kicks handed to the local stack, `pgkick dev` (pgkick_dev.devserver).

`make_kicker` is found here through the `pgkick.kickers` entry point. Inside one of
the stack's execution environments (PGKICK_LOCAL_PIPE_FD set) the worker's own kicks
go back to the stack over a pipe, which knows which invocation sent them (the chain's
next hop). Outside, in an app, it is a thin client of a running `pgkick dev`
(pgkick_dev.local.client), found or started before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pgkick import config
from pgkick.kick.kickers import Kicker


def make_kicker(settings: config.Settings, env: Mapping[str, str] | None = None) -> Kicker:
    env = os.environ if env is None else env
    if env.get("PGKICK_LOCAL_PIPE_FD"):  # inside a local environment: report to the stack
        from pgkick_dev.local.env import PipeKicker

        return PipeKicker(int(env["PGKICK_LOCAL_PIPE_FD"]))
    from pgkick_dev.local.client import connect

    return connect(env)
