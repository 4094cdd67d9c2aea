"""What a worker is told (`WorkerOptions`) and what it answers (`Summary`).

Why apart from the loop: the runtime builds the options from config.Settings and the
handlers turn the summary into their answer and metrics, without needing the loop's
machinery; the loop (pgkick.worker.loop) re-exports both.
"""

import random
from collections.abc import Callable
from datetime import timedelta
from typing import NamedTuple

from pgkick import config
from pgkick.errors import InvalidArgument
from pgkick.variables import LISTEN_MODES

CANCEL_CHECK_SECONDS = 2.0  # a cancel reaches a running task within this (pgkick.worker.lease)


class Summary:
    """What one invocation did: returned by the handler, turned into metrics (its counters
    start at zero; a plain class: pgkick.kick.throttle.Backoff says why)."""

    # The answer's keys, in its order (as_dict)
    __slots__ = (  # noqa: RUF023
        "queue",
        "claimed",
        "done",
        "failed",
        "retried",
        "lost",
        "rescued",
        "wake_failures",
        "healed_kicks",
        "dependant_kicks",
        "lapse_kicks",
        "healed_wakes",
        "snoozed",
        "continued",
        "batches",
        "rekicked",
        "fanouts",
        "stopped_because",
        "duration_ms",
    )

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.claimed = 0
        self.done = 0
        self.failed = 0
        self.retried = 0
        self.lost = 0
        self.rescued = 0  # expired leases a rescue re-queued before draining
        self.wake_failures = 0  # retries (and snoozes) whose wake-up could not be booked
        self.healed_kicks = 0  # other queues found ready and unwatched as it left (kicked)
        self.dependant_kicks = 0  # other queues kicked for jobs released by this worker's jobs
        self.lapse_kicks = 0  # its own queue kicked at its announcement's lapse (a long batch)
        self.healed_wakes = 0  # queues whose earliest future run_at got a wake-up as it left
        self.snoozed = 0  # back in the queue by pgkick.Snooze, no attempt used
        self.continued = 0  # back in the queue for a fresh invocation (job.step's time budget)
        self.batches = 0
        self.rekicked = False
        self.fanouts = 0
        self.stopped_because = ""
        self.duration_ms = 0

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"Summary({self.as_dict()})"


class WorkerOptions(NamedTuple):
    """The loop's knobs. Runtime builds them from config.Settings; the defaults are
    config's, except that the bare loop (tests, embedding) neither lingers, nor waits
    before fanning out, nor books safety wake-ups unless asked."""

    batch: int = config.DEFAULT_BATCH
    lease: timedelta = timedelta(seconds=config.DEFAULT_LEASE_SECONDS)
    min_remaining: timedelta = timedelta(milliseconds=config.DEFAULT_MIN_REMAINING_MS)
    max_fanout: int = config.DEFAULT_MAX_FANOUT
    fanout_after: timedelta = timedelta(0)  # full batches for this long before fanning out
    backoff: timedelta | None = None  # None: the SQL's 10 s x 2^attempts, capped at 1 hour
    backoff_cap: timedelta | None = None
    heartbeat: bool = True  # False: leases are extended only when a task asks (tests)
    linger: timedelta = timedelta(0)  # how long an empty queue is re-claimed before leaving
    watch_ttl: timedelta = timedelta(seconds=config.DEFAULT_WATCH_SECONDS)  # pgkick.kick.watch
    listen: str = "off"  # while lingering, wait for a NOTIFY: auto, on, off (pgkick.worker.linger)
    max_hops: int = config.DEFAULT_MAX_HOPS  # self-kicks per chain, then a wake-up
    heal: bool = True  # leaving, sweep every queue (pgkick.worker.healing)
    kick_pending: timedelta = timedelta(milliseconds=10_000)  # PGKICK_KICK_PENDING_MS
    kick_safety: timedelta = timedelta(0)  # PGKICK_KICK_SAFETY_MS (pgkick.kick.safety)
    # a failed kick's wake-up, this long after (PGKICK_FAILED_KICK_WAKE_MS; 0: the next minute)
    failed_kick_wake: timedelta = timedelta(0)
    backoff_jitter: float = 0.1  # a retry waits its backoff x (1 ± this), drawn at random
    # While jobs run, cancel marks are read this often between two extensions (a third of
    # the lease: 100 s and more on Lambda), so a cancel reaches its task within seconds.
    cancel_check: timedelta = timedelta(seconds=CANCEL_CHECK_SECONDS)


def check_options(options: WorkerOptions) -> WorkerOptions:
    """The options, or InvalidArgument naming the first that no worker can run with.

    Why: the loop took any value and misbehaved instead (a review, 2026-12-05): a batch of
    0 claimed nothing and left, a lease of 0 or less was over at its claim (the reaper
    re-queued the running job, five times, until it failed), a jitter of 1 or more made a
    retry's backoff negative (due at once: its attempts burnt in one drain), a cancel
    check of 0 or less spun the heartbeat at thousands of statements a second."""
    if type(options.batch) is not int or options.batch < 1:
        raise InvalidArgument(f"WorkerOptions.batch: {options.batch!r}, a whole number from 1")
    for field in ("lease", "cancel_check"):
        value = getattr(options, field)
        if not isinstance(value, timedelta) or value <= timedelta(0):
            raise InvalidArgument(f"WorkerOptions.{field}: {value!r}, a timedelta above 0")
    for field in ("min_remaining", "fanout_after", "linger", "watch_ttl", "kick_pending",
                  "kick_safety", "failed_kick_wake", "backoff", "backoff_cap"):  # fmt: skip
        value = getattr(options, field)
        if value is None and field.startswith("backoff"):
            continue  # the SQL's own backoff and cap
        if not isinstance(value, timedelta) or value < timedelta(0):
            raise InvalidArgument(f"WorkerOptions.{field}: {value!r}, a timedelta of 0 or more")
    if not 0 <= options.backoff_jitter < 1:  # NaN fails this too
        raise InvalidArgument(
            f"WorkerOptions.backoff_jitter: {options.backoff_jitter!r}, from 0 to under 1 "
            "(a retry waits its backoff x (1 +- this))"
        )
    for field in ("max_fanout", "max_hops"):
        value = getattr(options, field)
        if type(value) is not int or value < 0:
            raise InvalidArgument(f"WorkerOptions.{field}: {value!r}, a whole number from 0")
    if options.listen not in LISTEN_MODES:
        raise InvalidArgument(f"WorkerOptions.listen: {options.listen!r}, one of {LISTEN_MODES}")
    return options


def backoff_jitter(source: random.Random, spread: float = 0.1) -> Callable[[], float]:
    """Factors drawn uniformly from 1 - spread .. 1 + spread, from `source`."""
    return lambda: source.uniform(1 - spread, 1 + spread)
