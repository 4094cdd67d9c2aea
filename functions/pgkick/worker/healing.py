"""Self-healing dispatch: a worker that exits (and the reaper) sweeps every queue.

Why: a kick or a wake-up can be lost after its job committed. Lambda drops an
asynchronous event past its maximum age or without saying so, Scheduler throttles
CreateSchedule and refuses an at() already past, a worker can die between a retry's
write and its wake-up. Each such job is committed and ready (or due), and used to wait
for the daily reaper. Every worker already holds a connection when it leaves, so one
more statement there costs no wake of the database: it books one wake-up per queue, at
that queue's earliest run_at still to come (not one per job: the wake-up's worker drains
the queue and, leaving, books the next), and kicks each queue with a ready job, nobody
watching and nothing running (its pending kick reserved in the same statement, so racing
workers and producers send one). A queue with running jobs is left to their holder, who
sweeps as it leaves (or to its rescue): kicking there could only find nothing to claim
(a group or a limit held) and, leaving, kick again. Each kick and wake-up it sends is
followed by its safety wake-up (pgkick.kick.safety): the sweep's own kick can be lost too.
The reaper runs the same sweep for its wake-ups (`kick=False`: it kicked every ready queue).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import partial

from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.kick.safety import book_safety, kick_or_wake
from pgkick.store.healing import QueueHealing

log = logging.getLogger("pgkick.healing")


class Healed:
    """What a sweep did: the queues kicked, the wake-ups booked, and what failed (a plain
    class: pgkick.kick.throttle.Backoff says why)."""

    __slots__ = ("failures", "kicked", "woken")

    def __init__(self) -> None:
        self.kicked: list[str] = []
        self.woken: list[str] = []
        self.failures = 0


def heal_queues(
    store: QueueHealing,
    kicker: Kicker,
    *,
    pending: timedelta,
    safety: timedelta = timedelta(0),
    skip: str | None = None,
    kick: bool = True,
    failed_wake: timedelta = timedelta(0),
) -> Healed:
    """Book each queue's next wake-up and kick the ready queues nobody will see; never raises
    for a kicker's failure (the next sweep, or the reaper, tries again).

    safety: each kick and wake-up is followed by a safety wake-up this much later
    (pgkick.kick.safety; 0: none). kick=False: wake-ups only, for a caller that kicked
    every ready queue itself (the reaper); the plan still marks those kicks as pending."""
    healed = Healed()
    if isinstance(kicker, NoKicker):  # workers run by other means: reserve no kick
        return healed
    now = datetime.now(UTC)
    for plan in store.heal_plan(pending, skip=skip):
        if plan.kick and kick:  # failed: its reservation forgotten, a wake-up booked
            release = partial(store.release_kick, plan.queue)
            if kick_or_wake(kicker, plan.queue, "heal", safety=safety, failed_wake=failed_wake,
                            release=release, now=now):  # fmt: skip
                healed.kicked.append(plan.queue)
            else:
                healed.failures += 1
        if plan.next_run_at is not None:
            try:
                kicker.wake_at(plan.queue, plan.next_run_at)
                healed.woken.append(plan.queue)
            except Exception as exc:
                healed.failures += 1
                log.warning("could not book the wake-up of queue %s (%s)", plan.queue, exc)
            else:
                book_safety(kicker, plan.queue, plan.next_run_at, safety)
    return healed
