"""Safety wake-ups: every kick and every wake-up is followed, a minute later, by another.

Why: Lambda accepts an asynchronous invoke (202) and may still lose it: past the maximum
event age, or "deleted without being sent" (AWS documents both), and a schedule's
delivery to the worker is such an invoke too. The sender cannot tell. The sweep of a
leaving worker (pgkick.worker.healing) heals such a loss only if some worker leaves
afterwards; on a quiet day the last burst's lost kick, and the heal kick sent for it if
that too is lost, left its jobs to the daily reaper (`pgkick bench` quiet_day: 5 of 60).

So whoever sends a kick (a producer after its commit, a leaving worker's sweep, the
reaper, a worker handing its queue over) or books a wake-up at `run_at` also books a
safety wake-up of the same queue at `PGKICK_KICK_SAFETY_MS` later (60 s, rounded up to
Scheduler's minute), noted before the kick is sent (a sender killed during its kick leaves
it booked). It is an ordinary wake-up, named per queue and minute, so:
- one Scheduler call per queue and minute at most, per process: a wake-up of that queue
  and minute booked or noted already costs nothing more (pgkick.kick.bookings), and the
  safety of a wake-up at minute M is the wake-up of M+1 when jobs are due then too;
- it is never cancelled: when the queue was served, its worker claims nothing and leaves
  (one invocation and one short session, a minute after the burst, while a serverless
  database is still awake from it: it lengthens the awake time by that minute, it wakes
  nothing), and leaving, it sweeps every queue (kicks, wake-ups, and their safeties).
A lost safety is itself a lost event: the chain holds while one of its links arrives; each
dispatch has two chances, and every worker that arrives sweeps again.

Nothing here polls: a safety is booked only when a kick or a wake-up was sent, and fires
once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pgkick.kick.kickers import Kicker

log = logging.getLogger("pgkick.kick")


def book_safety(kicker: Kicker, queue: str, sent_for: datetime, after: timedelta) -> bool:
    """Book `queue`'s safety wake-up at `sent_for + after` (sent_for: the kick's moment, or
    the wake-up's run_at). Never raises: a safety that cannot be booked loses nothing that
    its kick or wake-up has not (the next sweep, or the reaper). False: none booked."""
    if after <= timedelta(0):
        return False
    return _wake(kicker, queue, sent_for + after, "a lost kick waits for the next sweep")


def wake_after_failed_kick(
    kicker: Kicker,
    queue: str,
    *,
    after: timedelta,
    release: Callable[[], None] | None = None,
    now: datetime | None = None,
) -> bool:
    """Heal a kick that raised, as a producer heals its own (pgkick.producer.after_commit):
    forget the pending kick it reserved, if any (`release`), so the next producer or sweep
    kicks instead of trusting it for PGKICK_KICK_PENDING_MS; and book a wake-up `after`
    from now (PGKICK_FAILED_KICK_WAKE_MS: Scheduler's next minute by default). Never raises;
    False: no wake-up could be booked either (a worker then keeps its rescue armed).

    Why every sender needs it: a worker that handed its queue over, released dependants or
    swept a ready queue, and whose kick failed, only logged; its reservation made the next
    producers and sweeps trust a kick never sent, and no wake-up followed, so the jobs
    waited for the daily reaper (a review reproduced each, 2026-12-05)."""
    if release is not None:
        try:
            release()
        except Exception as exc:
            log.warning("could not forget the pending kick of queue %s (%s)", queue, _brief(exc))
    return _wake(kicker, queue, (now or datetime.now(UTC)) + after, "after its failed kick")


def _wake(kicker: Kicker, queue: str, when: datetime, why: str) -> bool:
    """Book a wake-up; False, and a warning saying `why` it mattered, if it cannot be."""
    try:
        kicker.wake_at(queue, when)
    except Exception as exc:
        log.warning("no wake-up for queue %s (%s): %s", queue, _brief(exc), why)
        return False
    return True


def _brief(exc: BaseException) -> str:
    # (imported on this error path only: the worker's cold start does without)
    from pgkick.awsapi.signature import without_session_token

    return f"{type(exc).__name__}: {' '.join(without_session_token(str(exc)).split())[:300]}"


def kick_with_safety(
    kicker: Kicker,
    queue: str,
    reason: str,
    *,
    after: timedelta,
    hop: int = 0,
    now: datetime | None = None,
) -> None:
    """Note `queue`'s safety wake-up, then kick it. Raises as `kicker.kick` raises (the
    caller's failed-kick path books its own, earlier, wake-up). The safety first: noted, it
    is booked by the kicker's thread while the kick is in flight, so a sender killed during
    a kick that hangs leaves it booked, where its reservation silences every other sender
    for PGKICK_KICK_PENDING_MS (the sweeps only kick a queue once that lapses)."""
    book_safety(kicker, queue, now or datetime.now(UTC), after)
    kicker.kick(queue, reason, hop=hop)


def kick_or_wake(
    kicker: Kicker,
    queue: str,
    reason: str,
    *,
    safety: timedelta,
    failed_wake: timedelta,
    hop: int = 0,
    release: Callable[[], None] | None = None,
    now: datetime | None = None,
) -> bool:
    """Kick `queue` and book its safety wake-up `safety` later; a kick that raises is healed
    as wake_after_failed_kick heals it (`release` its reservation, a wake-up `failed_wake`
    out). The rule of every sender that has nothing else to do on failure (a leaving
    worker's sweep, its kick of released dependants, an operator's command). Never raises;
    True: kicked."""
    try:
        kick_with_safety(kicker, queue, reason, after=safety, hop=hop, now=now)
    except Exception as exc:
        log.warning("could not kick queue %s (%s); waking it instead", queue, _brief(exc))
        wake_after_failed_kick(kicker, queue, after=failed_wake, release=release, now=now)
        return False
    return True
