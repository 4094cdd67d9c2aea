"""The local kicker: Lambda's asynchronous invoke stood in by processes, for development.

`PGKICK_KICKER=local` finds `make_kicker` here through the `pgkick.kick.default` entry
point. Inside one of its environments (PGKICK_LOCAL_PIPE_FD set) the worker's own
kicks go back to the parent kicker through a pipe. Outside, it also fires the
`@pgkick.periodic` declarations of PGKICK_TASKS' modules with timers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pgkick import config
from pgkick.kick.kickers import Kicker


def make_kicker(settings: config.Settings, env: Mapping[str, str] | None = None) -> Kicker:
    env = os.environ if env is None else env
    if env.get("PGKICK_LOCAL_PIPE_FD"):  # inside a local environment: report to the parent
        from pgkick_dev.local.env import PipeKicker

        return PipeKicker(int(env["PGKICK_LOCAL_PIPE_FD"]))
    from pgkick.tasks.recurring import periodic_registry
    from pgkick.tasks.registry import registry
    from pgkick_dev.local.kicker import LocalKicker

    # The scheduler's stand-in fires what PGKICK_TASKS' modules declare (importing them
    # runs their @pgkick.periodic), as `pgkick schedules sync` would have created it.
    registry.load(settings.task_modules)
    # Workers' lines to stderr: an app's (or `pgkick enqueue --json`'s) stdout stays its own.
    return LocalKicker(
        concurrency=settings.local_concurrency,
        output=Path("/dev/stderr"),
        periodic=list(periodic_registry.declared.values()),
    )
