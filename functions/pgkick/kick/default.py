"""Which kicker PGKICK_KICKER names, made once per process.

Why apart from pgkick.kick.kickers and pgkick.worker.runtime: the producer needs a kicker, not
the worker loop, so `import pgkick` stays light (no worker, lease or reaper
modules), and the choice is in one place with its one error for "nothing set".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points

from pgkick import config
from pgkick.errors import ConfigError
from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.kick.lambda_kicker import LambdaKicker

__all__ = ["default_kicker", "make_kicker", "set_default_kicker"]


def make_kicker(settings: config.Settings, env: Mapping[str, str] | None = None) -> Kicker:
    """The kicker the settings name; a ConfigError, before anything is written, if none is.

    `local` lives in the development tooling (pgkick-dev), found by its entry point
    `pgkick.kickers:local`, so the runtime never imports the tooling. `env` is handed to
    such a plugin as given (None: the plugin reads the process's own)."""
    if settings.kicker == "none":
        return NoKicker()
    if settings.kicker == "lambda":
        return LambdaKicker.from_settings(settings)
    if settings.kicker == config.UNSET:
        raise ConfigError(
            "no kicker configured: set PGKICK_WORKER_FUNCTION to the worker Lambda's name "
            "or ARN (production), PGKICK_KICKER=local to run workers as local processes "
            "(development, needs pgkick-dev), or PGKICK_KICKER=none if you run workers yourself"
        )
    found = entry_points(group="pgkick.kickers", name=settings.kicker)
    if not found:
        raise ConfigError(
            f"PGKICK_KICKER={settings.kicker}: no such kicker installed "
            "(the local kicker comes with the development tooling pgkick-dev, not on an "
            "index yet: install its wheel as docs/getting-started/install.md shows)"
        )
    factory: Callable[[config.Settings, Mapping[str, str] | None], Kicker] = next(
        iter(found)
    ).load()
    return factory(settings, env)


_default: Kicker | None = None
_default_lock = threading.Lock()


def default_kicker() -> Kicker:
    """The process-wide kicker that PGKICK_KICKER selects, made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = make_kicker(config.Settings.from_env())
        return _default


def set_default_kicker(kicker: Kicker | None) -> Kicker | None:
    """Replace the process-wide kicker (pgkick.testing installs its own); returns the old one.

    None forgets it, so the next `default_kicker()` reads PGKICK_KICKER again."""
    global _default
    with _default_lock:
        previous, _default = _default, kicker
    return previous
