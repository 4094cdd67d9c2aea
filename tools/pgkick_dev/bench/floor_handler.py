"""The cold path's floor: a Lambda handler that only imports psycopg and connects.

Why: pgkick's cold commit-to-claim is compared with what any Python function that
talks to PostgreSQL pays on the same runtime (AWS's emulator and Lambda's runtime
client, a new environment): process start, `import psycopg`, one connection. The
connection is opened in the handler, as pgkick's worker opens its own (nothing at
import). It returns the wall-clock instant it was connected; the bench subtracts the
job's commit. Kinder than a claim by one statement's round trip, which it skips.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg


def handler(event: Any, context: Any) -> dict[str, float]:
    with psycopg.connect(os.environ["DATABASE_URL"], application_name="pgkick-floor"):
        connected = time.time()
    return {"connected_at": connected}
