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

The worker's own queue is never kicked (it just found it empty), but its row says whether
it still needs this worker (`stay_for`): a job due within the server-clock allowance
committed while the worker lingered got no kick (the producer saw the worker) and may
not have been due at its last claim; the worker claims again rather than leave it to
Scheduler's next minute (5 to 65 s) or, with no wake-up booked, to traffic or the reaper.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import partial

from pgkick.kick.kickers import SERVER_CLOCK_ALLOWANCE, Kicker, NoKicker
from pgkick.kick.safety import book_safety, kick_or_wake
from pgkick.kick.watch import MAX_PAUSE
from pgkick.store.healing import QueueHealing, QueuePlan

log = logging.getLogger("pgkick.healing")

# How soon a job of its own queue must be due for a leaving worker to stay for it. A job
# left to this worker (its producer saw the announcement, so sent no kick) was due within
# SERVER_CLOCK_ALLOWANCE by the producer's clock when it checked, before this worker
# withdrew and so before the sweep; the second term is the producer's clock's distance
# from the server's (the allowance's own margin, a longest pause). A wait of at most this,
# and only when such a job is queued: an idle queue costs nothing more.
STAY_HORIZON = SERVER_CLOCK_ALLOWANCE + timedelta(seconds=MAX_PAUSE)


class Healed:
    """What a sweep did: the queues kicked, the wake-ups booked, and what failed (a plain
    class: pgkick.kick.throttle.Backoff says why)."""

    __slots__ = ("failures", "kicked", "own", "woken")

    def __init__(self) -> None:
        self.kicked: list[str] = []
        self.woken: list[str] = []
        self.failures = 0
        self.own: QueuePlan | None = None  # the skipped queue's row: see stay_for


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
        if plan.queue == skip:
            healed.own = plan
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


def stay_for(own: QueuePlan | None) -> float | None:
    """Seconds a worker leaving its queue waits before claiming it again; None: it leaves.

    Ready and unserved at the sweep (due between the last claim and the sweep): at once.
    Due within STAY_HORIZON of the sweep's now (both the server's clock): until then."""
    if own is None or own.swept_at is None:
        return None
    if own.unserved:
        return 0.0
    if own.next_run_at is None:
        return None
    wait = own.next_run_at - own.swept_at
    return wait.total_seconds() if wait <= STAY_HORIZON else None
