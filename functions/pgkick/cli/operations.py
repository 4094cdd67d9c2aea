"""The operator's actions on jobs, as library calls: `pgkick retry`, `pgkick cancel` and the
dashboard's buttons run these same functions.

Why apart from the commands: a button and a command must refuse the same things
(a job that does not exist, or is not in a state the action applies to) and change
the same rows, so the checks and the statements are called from one place.
"""

import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple

from pgkick import config
from pgkick.errors import JobMissing, UsageError
from pgkick.kick import safety
from pgkick.kick.kickers import Kicker
from pgkick.store import unique
from pgkick.store.operator import OperatorStore
from pgkick.validation import MAX_ATTEMPTS_LIMIT

log = logging.getLogger("pgkick.cli")


def check_ids(store: OperatorStore, ids: list[int], status: str) -> None:
    """Refuse (changing nothing) unless every job named exists and is in `status` ("a|b")."""
    jobs = {job["id"]: job for job in store.get_many(ids)}
    missing = [i for i in ids if i not in jobs]
    problems = [
        f"job {i} does not exist" if i not in jobs else f"job {i} is {jobs[i]['status']}"
        for i in ids
        if i not in jobs or jobs[i]["status"] not in status.split("|")
    ]
    if status == "failed":  # a retry: attempts count up, and may not pass the limit
        problems += [
            f"job {i} has used all {MAX_ATTEMPTS_LIMIT} attempts"
            for i, job in jobs.items()
            if job["attempts"] >= MAX_ATTEMPTS_LIMIT
        ]
    if problems:
        error = JobMissing if missing else UsageError
        raise error(f"nothing changed: {'; '.join(problems)} (expected {status})")


def check_retry(
    store: OperatorStore, *, ids: list[int] | None, queue: str | None, task: str | None
) -> None:
    """Refuse (changing nothing) a retry that would put a failed job next to a live one
    with its unique key, naming them: the index would refuse it too, less clearly, and
    a dry run must refuse what the retry refuses. And one that selects a job whose parent,
    under fail or cancel, failed and is not selected: the retry would leave it failed."""
    conflicts = store.retry_conflicts(ids=ids, queue=queue, task=task)
    if conflicts:
        raise UsageError(f"nothing changed: {unique.describe_conflicts(conflicts)}")
    blocked = store.retry_blocked(ids=ids, queue=queue, task=task)
    if blocked:  # it would stay failed: its parent's failure still stands
        named = "; ".join(
            f"job {job} waits for job {parent}, which failed" for job, parent in blocked[:5]
        )
        raise UsageError(
            f"nothing changed: {named}: retry the parent (its retry makes its dependants "
            "wait for it again), or both"
        )


class Retried(NamedTuple):
    """What a retry did: the jobs queued again, (id, queue) each, and how many of their
    dependants (failed or cancelled by their failure, transitively) wait again."""

    jobs: list[tuple[int, str]]
    revived: int


def retry(
    store: OperatorStore,
    *,
    ids: list[int] | None,
    queue: str | None = None,
    task: str | None = None,
    extra_attempts: int = 1,
) -> Retried:
    """Put failed jobs back in the queue with more attempts, reviving the dependants their
    failure ended (migration 0019), in one transaction. Kick their queues after this
    connection's work (`kick_queues`); the revived wait for them, nothing to kick."""
    check_retry(store, ids=ids, queue=queue, task=task)
    with store.transaction():  # the count is the transaction's
        jobs = store.retry_failed(ids=ids, queue=queue, task=task, extra_attempts=extra_attempts)
        return Retried(jobs, store.revived_dependants() if jobs else 0)


class Cancelled(NamedTuple):
    cancelled: list[int]  # queued and waiting jobs, failed now
    marked: list[int]  # running jobs, asked to stop
    released: set[str]  # queues their dependants entered ("run anyway"): to kick


def cancel(
    store: OperatorStore,
    *,
    ids: list[int] | None,
    queue: str | None = None,
    task: str | None = None,
) -> Cancelled:
    """Queued and waiting jobs fail at once, running ones are marked (they fail when they
    stop): queued first, so one claimed meanwhile is marked by the second statement. One
    transaction, so the queues their dependants entered are read before its commit."""
    with store.transaction():
        cancelled = store.cancel_queued(ids=ids, queue=queue, task=task)
        released = store.released_queues() if cancelled else set()
        marked = store.cancel_running(ids=ids, queue=queue, task=task)
    return Cancelled([i for i, _ in cancelled], [i for i, _ in marked], released)


def kick_or_wake(kicker: Kicker, queue: str, reason: str) -> bool:
    """Kick `queue` after an operator's commit, as every sender of a kick does
    (pgkick.kick.safety.kick_or_wake: its safety wake-up, or a wake-up for a kick that
    failed; these only logged, and a lost or failed kick left the jobs to the daily reaper
    on a quiet day). Never raises (the write is committed); True: kicked."""
    settings = config.app_settings()
    return safety.kick_or_wake(
        kicker, queue, reason, safety=settings.kick_safety, failed_wake=settings.failed_kick_wake
    )


def kick_released(queues: Iterable[str], kicker: Callable[[], Kicker]) -> None:
    """Kick each queue dependants entered, after the commit (kick_or_wake)."""
    for queue in sorted(queues):
        try:
            built = kicker()
        except Exception as exc:  # no kicker: nothing to wake with either; a sweep or the reaper
            log.warning("could not kick queue %s for its released dependants (%s)", queue, exc)
            continue
        kick_or_wake(built, queue, "dependants")


def kick_queues(jobs: Iterable[tuple[int, str]], kicker: Kicker) -> None:
    """One kick per queue that got jobs back, after the commit (kick_or_wake)."""
    for queue in sorted({queue for _, queue in jobs}):
        kick_or_wake(kicker, queue, "manual")
