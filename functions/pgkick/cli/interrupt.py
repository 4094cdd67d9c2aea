"""Ctrl-C in the middle of a bulk action: the batch under way finishes, then the action stops
and says how many jobs it changed.

Why not let KeyboardInterrupt fly: it lands anywhere, in a batch's statement (rolled back) or
in its COMMIT (the server may have committed it while Python unwinds), so the command could
not say how far it got, and printed a traceback (a review of the CLI, F2). A batch is short
(1,000 ids by default), so the first Ctrl-C waits for it; a second one stops at once, as
Ctrl-C always did (its transaction, if one is under way, is rolled back).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any


class BetweenBatches:
    """`with BetweenBatches() as ctrl_c:` ... `if ctrl_c.pressed: stop`. Only the main thread
    can take SIGINT's handler: elsewhere (an app's thread calling pgkick.cli.bulk) the
    handler is left as it is and `pressed` stays False."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None
        self._installed = False

    def _press(self, signum: int, frame: FrameType | None) -> None:
        if self.pressed:  # the second Ctrl-C: at once
            raise KeyboardInterrupt
        self.pressed = True

    def __enter__(self) -> BetweenBatches:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._press)
            self._installed = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
