"""A handler that invokes itself until its event's hop reaches $PGKICK_TEST_CHAIN: the
shape of a chain Lambda's recursive-loop detection cuts (run by the local kicker)."""

from __future__ import annotations

import os
from typing import Any

from pgkick.kick.default import default_kicker


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    hop = int(event.get("hop", 0))
    if hop < int(os.environ["PGKICK_TEST_CHAIN"]):
        default_kicker().kick(event["queue"], "manual", hop=hop + 1)
    return {"hop": hop}


def unmarshallable(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Answers with a datetime, which Lambda's runtime cannot send back."""
    from datetime import UTC, datetime

    return {"at": datetime.now(UTC)}
