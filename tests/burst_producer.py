"""A producer process for the debounce and throttle bursts: `python -m tests.burst_producer
DSN MODE PROCESS COUNT` (MODE: debounce or throttle).

It waits for a line on stdin (the test's start signal, so the four processes burst at
once), then calls `enqueue_and_kick` COUNT times with one unique key, each payload naming
its process and its rank, and prints each returned id.
"""

from __future__ import annotations

import sys

import pgkick
from pgkick.kick.kickers import NoKicker

KEY = "burst"


def main(dsn: str, mode: str, process: int, count: int) -> int:
    flow = {"debounce": 3600} if mode == "debounce" else {"throttle": 3600}
    sys.stdin.readline()
    for n in range(count):
        job_id = pgkick.enqueue_and_kick(
            {"process": process, "n": n},
            task="noop",
            unique_key=KEY,
            dsn=dsn,
            kicker=NoKicker(),
            **flow,  # type: ignore[arg-type]
        )
        print(job_id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
