"""A producer process for the dispatch stress test: `python -m tests.stress_producer N SEED`.

It calls `enqueue_and_kick` N times at random short intervals, as an app's process
would, with PGKICK_KICKER=lambda and boto3's endpoint pointing at the test's
LocalKicker's stack, which receives its kicks over HTTP. Prints each committed job id on stdout.
"""

from __future__ import annotations

import random
import sys
import time

import pgkick


def main(count: int, seed: int) -> int:
    rng = random.Random(seed)
    for n in range(count):
        job_id = pgkick.enqueue_and_kick({"n": n}, task="record_span")
        print(job_id, flush=True)
        time.sleep(rng.choice([0, 0, 0.001, 0.005, 0.02, 0.3]))  # 0.3: past the linger
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
