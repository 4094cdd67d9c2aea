"""A handler module whose import waits for the file $PGKICK_TEST_GATE: a cold start the
test can catch in the middle of its init."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

_deadline = time.monotonic() + 30
while not Path(os.environ["PGKICK_TEST_GATE"]).exists() and time.monotonic() < _deadline:
    time.sleep(0.01)


def handler(event: Any, context: Any) -> dict[str, Any]:
    return {"initialised": True}
