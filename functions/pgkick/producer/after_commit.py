"""After a commit: kick the queues whose jobs just became visible, book wake-ups for
later ones, and never raise.

Why never raise: every job handed here is committed, so it is safe; the next
wake-up (a later kick, a scheduled wake, the reaper) runs it. Raising would invite
the caller to enqueue it again. Both producers (`pgkick.producer.enqueue`, `pgkick.aio`)
and `pgkick.producer.joined` end their commits here; `stats` counts what happened, for
tests and operators.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from pgkick import config
from pgkick.kick.kickers import Kicker, NoKicker, due_by
from pgkick.kick.safety import book_safety, wake_after_failed_kick
from pgkick.store.producer import ProducerStore, QueuedJob

log = logging.getLogger("pgkick.producer")


@dataclass
class ProducerStats:
    kicks: int = 0
    kick_failures: int = 0  # kicks and wake-ups that raised
    wake_failures: int = 0  # of which wake-ups
    wakes: int = 0
    safeties: int = 0  # safety wake-ups noted (pgkick.kick.safety)


stats = ProducerStats()


def kick_committed(
    jobs: list[QueuedJob],
    kicker: Kicker,
    store_for: Callable[[], AbstractContextManager[ProducerStore]],
    *,
    reserved: set[str] | None = None,
    now: datetime | None = None,
) -> None:
    """Kick the queues whose ready jobs nobody will see; book a wake-up for later ones.

    `reserved`: the queues whose kick this caller already reserved (enqueue_and_kick
    does it in its insert's round trip); None reserves them here, on a store from
    `store_for` (pgkick.kick.watch). Never raises: every job here is committed, so the
    whole body is guarded, not only the kicks (a review, F1: jobs an app's dict_row
    connection read back as column names raised in ready_queues, after the commit)."""
    try:
        _kick_committed(jobs, kicker, store_for, reserved, now or datetime.now(UTC))
    except Exception as exc:
        stats.kick_failures += 1
        log.warning(
            "could not kick after the commit (%s: %s); jobs %s are committed and will run "
            "at the next wake-up",
            type(exc).__name__,
            one_line(exc),
            [getattr(job, "id", job) for job in jobs[:20]],
        )


def _kick_committed(
    jobs: list[QueuedJob],
    kicker: Kicker,
    store_for: Callable[[], AbstractContextManager[ProducerStore]],
    reserved: set[str] | None,
    now: datetime,
) -> None:
    if isinstance(kicker, NoKicker):  # workers run by other means: reserve nothing
        return
    ready = ready_queues(jobs, now)
    later = sorted({(job.queue, job.run_at) for job in jobs if job.run_at > now})
    try:
        if reserved is None and ready:
            with store_for() as store:
                reserved = store.reserve_kicks(ready, config.app_settings().kick_pending)
    except Exception as exc:  # cannot tell whether a worker watches: kick anyway
        log.warning("could not check who watches %s (%s); kicking", ready, one_line(exc))
        reserved = set(ready)
    safety = config.app_settings().kick_safety
    for queue in sorted(reserved or ()):
        # A kick Lambda accepts may still be lost: its safety (pgkick.kick.safety), noted
        # before the kick is sent, so that a process killed while its kick hangs (an app's
        # Lambda timing out) leaves it booked: its reservation silences the next producers.
        stats.safeties += book_safety(kicker, queue, now, safety)
        if not _guard(functools.partial(kicker.kick, queue, "enqueue"), queue, jobs):
            _after_failed_kick(queue, jobs, kicker, store_for, now)
        stats.kicks += 1
    covered: set[str] = set()
    for queue, when in later:
        if not _guard(functools.partial(kicker.wake_at, queue, when), queue, jobs):
            stats.wake_failures += 1  # `pgkick status` shows such jobs once they are stranded
        elif queue not in covered:  # the earliest: its worker, leaving, books the next
            covered.add(queue)
            stats.safeties += book_safety(kicker, queue, when, safety)
        stats.wakes += 1


def ready_queues(jobs: list[QueuedJob], now: datetime) -> list[str]:
    """The queues of the jobs due by `now` (on the server's clock: `due_by`), whose kicks
    are to be reserved (sorted: two producers reserving the same queues lock their rows in
    the same order)."""
    return sorted({job.queue for job in jobs if due_by(job.run_at, now)})


def _after_failed_kick(
    queue: str,
    jobs: list[QueuedJob],
    kicker: Kicker,
    store_for: Callable[[], AbstractContextManager[ProducerStore]],
    now: datetime,
) -> None:
    """Forget the pending kick (so the next producer kicks) and book a wake-up
    PGKICK_FAILED_KICK_WAKE_MS out (0 by default: Scheduler's next minute): the rule every
    sender of a kick follows (pgkick.kick.safety.wake_after_failed_kick)."""

    def release() -> None:
        with store_for() as store:
            store.release_kick(queue)

    after = config.app_settings().failed_kick_wake
    if not wake_after_failed_kick(kicker, queue, after=after, release=release, now=now):
        stats.wake_failures += 1
        ids = [job.id for job in jobs if job.queue == queue]
        log.warning("jobs %s of queue %s wait for a sweep or the reaper", ids[:20], queue)


def _guard(call: Callable[[], None], queue: str, jobs: list[QueuedJob]) -> bool:
    try:
        call()
    except Exception as exc:
        stats.kick_failures += 1
        ids = [job.id for job in jobs if job.queue == queue]
        log.warning(
            "kick for queue %s failed (%s: %s); jobs %s are committed and will run "
            "at the next wake-up",
            queue,
            type(exc).__name__,
            one_line(exc),
            ids[:20],
            extra={"queue": queue, "job_ids": ids[:20]},
        )
        return False
    return True


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500]
