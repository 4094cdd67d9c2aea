"""Kicking the queues that a worker's own writes made ready: jobs that waited for the ones
it just completed or failed (issue 34, migration 0017).

Why the worker kicks them: a dependant becomes ready in the transaction that finishes its
last parent (the database's trigger), and nobody else knows it then: no producer
committed it, no poller looks. The worker that wrote that transaction learns the queues
from its complete's own rows (no statement when no job had dependants) and kicks those
that nobody watches, reserving each kick first exactly as a producer does
(queue_kick_reserve), so a worker already draining a queue is not sent a second one.
Its own queue is left out: its next claim (in the same round trip as the complete) sees
what was released there, and a worker out of time re-checks it before it hands over.

Why a kick carries the releasing invocation's hop + 1: a chain of dependants across two
queues is a chain of invocations, each kicked from the one before, which Lambda's
recursive-loop detection cuts after about 16 whatever the queue. Past `max_hops` the queue
gets a wake-up instead (a fresh chain from the scheduler), as a worker's own rekick does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import partial

from pgkick.kick.kickers import Kicker, NoKicker
from pgkick.kick.safety import kick_with_safety, wake_after_failed_kick
from pgkick.store.worker import WorkerStore

log = logging.getLogger("pgkick.dependants")


def kick_released(
    store: WorkerStore,
    kicker: Kicker,
    queues: Iterable[str],
    *,
    skip: str,
    pending: timedelta,
    hop: int,
    max_hops: int,
    failed_wake: timedelta = timedelta(0),
    safety: timedelta = timedelta(0),
) -> int:
    """Kick each queue of `queues` (but `skip`) that nobody watches, at `hop` (the releasing
    invocation's + 1), or past `max_hops` book it a wake-up now; returns the kicks sent.
    Never raises: a kick that fails forgets its reservation and books a wake-up
    `failed_wake` out (pgkick.kick.safety.wake_after_failed_kick); a kick sent is followed by
    its safety wake-up `safety` later (pgkick.kick.safety: the leaving worker's own sweep
    trusts the kick it reserved, so a kick Lambda accepted and lost had no other cover)."""
    wanted = sorted(set(queues) - {skip})
    if not wanted or isinstance(kicker, NoKicker):  # NoKicker: a reservation never sent
        return 0
    sent = 0
    try:
        reserved = store.reserve_kicks(wanted, pending)
    except Exception:
        log.exception("could not reserve kicks for released dependants in %s", wanted)
        return 0
    for queue in reserved:
        try:
            if hop > max_hops:
                log.info("chain of %s hops: waking queue %s for released dependants", hop, queue)
                kicker.wake_at(queue, datetime.now(UTC))
            else:
                kick_with_safety(kicker, queue, "dependants", after=safety, hop=hop)
            sent += 1
        except Exception as exc:
            log.warning("could not kick queue %s for released dependants (%s)", queue, exc)
            wake_after_failed_kick(
                kicker, queue, after=failed_wake, release=partial(store.release_kick, queue)
            )
    return sent


def released_by_failure(store: WorkerStore, job_id: int) -> set[str]:
    """The queues a failed job's 'run anyway' dependants entered (one read, only for a job
    that has dependants); never raises (the sweep heals a miss)."""
    try:
        return store.dependants_ready_queues(job_id)
    except Exception:
        log.exception("could not read the dependants released by job %s", job_id)
        return set()
