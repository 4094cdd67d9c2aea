"""After the claim: fenced complete/fail/extend, the backoff schedule, the reaper, purge."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from pgkick.store.worker import ClaimedJob
from tests.helpers import FakeClock, job_row, seed, statement_calls
from tests.store import JobStore

LEASE = timedelta(minutes=5)


@pytest.fixture
def timed(dsn: str, clock: FakeClock) -> Iterator[JobStore]:
    """A store whose SQL `now` is the test's clock."""
    with JobStore.open(dsn, clock) as opened:
        yield opened


def claim_one(store: JobStore) -> tuple[int, int]:
    (job,) = store.claim("default", batch=1, lease=LEASE)
    return job.id, job.attempts


def test_stale_attempt_changes_nothing_and_says_so(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """The article's slow worker: its lease expired, another worker took the job over."""
    (job_id,) = seed(timed, 1)
    _, stale = claim_one(timed)
    clock.advance(LEASE.total_seconds() + 1)
    assert [r.id for r in timed.reap_expired()] == [job_id]
    _, current = claim_one(timed)
    assert (stale, current) == (1, 2)
    before = job_row(dsn, job_id)

    assert timed.complete(job_id, stale) is False
    assert timed.fail(job_id, stale, "late failure").owned is False
    assert timed.extend(job_id, stale, LEASE) is False
    assert timed.complete_many([_claimed(job_id, stale)]) == set()
    assert job_row(dsn, job_id) == before  # untouched: still the new owner's

    assert timed.extend(job_id, current, LEASE) is True
    assert timed.complete(job_id, current) is True
    assert job_row(dsn, job_id)["status"] == "done"
    assert timed.complete(job_id, current) is False  # and only once


def test_a_stale_attempt_writes_nothing_through_either_completion(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    """Catches the attempt fence lost from the one completion UPDATE (migration 0010's
    job_complete): a worker whose lease was taken over completes the job, with a result,
    through its flush (job_complete_many) and through its round trip
    (job_complete_and_claim); the row stays the new owner's, untouched, result and all."""
    (job_id,) = seed(timed, 1)
    _, stale = claim_one(timed)
    clock.advance(LEASE.total_seconds() + 1)
    assert [r.id for r in timed.reap_expired()] == [job_id]
    _, current = claim_one(timed)
    assert (stale, current) == (1, 2)
    before = job_row(dsn, job_id)
    late = ClaimedJob(job_id, "default", "noop", {}, stale, 5, result='"late"')

    assert timed.complete_many([late]) == set()
    assert job_row(dsn, job_id) == before
    held, claimed = timed.complete_many_and_claim([late], "default", batch=1, lease=LEASE)
    assert (held, claimed) == (set(), [])
    assert job_row(dsn, job_id) == before
    assert before["status"] == "running" and before["result"] is None


def _claimed(job_id: int, attempts: int) -> ClaimedJob:
    return ClaimedJob(job_id, "default", "noop", {}, attempts, 5)


def test_complete_many_is_fenced_per_job(dsn: str, timed: JobStore, clock: FakeClock) -> None:
    seed(timed, 3)
    jobs = timed.claim("default", batch=3, lease=LEASE)
    lost = jobs[1]
    timed.conn.execute(  # somebody else's attempt now holds the middle job
        "UPDATE pgkick.jobs SET attempts = attempts + 1 WHERE id = %s", (lost.id,)
    )
    assert timed.complete_many(jobs) == {jobs[0].id, jobs[2].id}
    assert job_row(dsn, lost.id)["status"] == "running"


def test_backoff_doubles_from_20_seconds_then_fails_at_max_attempts(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    (job_id,) = seed(timed, 1)
    delays = []
    for attempt in range(1, 5):
        _, attempts = claim_one(timed)
        assert attempts == attempt
        outcome = timed.fail(job_id, attempts, f"SMTP 451 (try {attempt})")
        assert outcome.owned and outcome.status == "queued" and outcome.run_at
        delays.append((outcome.run_at - clock.now).total_seconds())
        assert timed.claim("default", batch=1, lease=LEASE) == []  # not ready before run_at
        clock.now = outcome.run_at
    assert delays == [20, 40, 80, 160]
    _, attempts = claim_one(timed)
    outcome = timed.fail(job_id, attempts, "SMTP 451 (try 5)")
    assert outcome.status == "failed"
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 5, "SMTP 451 (try 5)")
    assert row["finished_at"] == clock.now and row["locked_until"] is None


def test_backoff_is_capped_at_one_hour(dsn: str, timed: JobStore, clock: FakeClock) -> None:
    (job_id,) = seed(timed, 1, max_attempts=100)
    delays = []
    for _ in range(30):  # past 2^20: the exponent must not overflow an interval
        _, attempts = claim_one(timed)
        outcome = timed.fail(job_id, attempts, "still down")
        assert outcome.run_at is not None
        delays.append((outcome.run_at - clock.now).total_seconds())
        clock.now = outcome.run_at
    assert delays[:8] == [20, 40, 80, 160, 320, 640, 1280, 2560]
    assert set(delays[8:]) == {3600}


def test_permanent_failure_skips_retries_and_error_is_truncated(dsn: str, timed: JobStore) -> None:
    (job_id,) = seed(timed, 1)
    _, attempts = claim_one(timed)
    outcome = timed.fail(job_id, attempts, "unknown task 'nope' " + "x" * 5000, permanent=True)
    assert outcome.status == "failed"
    row = job_row(dsn, job_id)
    assert row["attempts"] == 1
    assert isinstance(row["last_error"], str) and len(row["last_error"]) == 2000
    assert row["last_error"].startswith("unknown task 'nope'")


def test_reaper_requeues_expired_fails_at_max_and_leaves_live_leases(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    expired, poison, live = seed(timed, 3)
    timed.conn.execute("UPDATE pgkick.jobs SET max_attempts = 1 WHERE id = %s", (poison,))
    timed.claim("default", batch=2, lease=LEASE)  # expired and poison, attempt 1
    clock.advance(60)
    timed.claim("default", batch=1, lease=LEASE)  # live, claimed a minute later
    clock.advance(LEASE.total_seconds() - 30)  # the first two expired, live has 30 s left

    reaped = {r.id: r for r in timed.reap_expired()}
    assert set(reaped) == {expired, poison}
    assert reaped[expired].status == "queued"
    assert reaped[poison].status == "failed"
    assert job_row(dsn, poison)["last_error"] == "lease expired (attempt 1 of 1)"
    assert job_row(dsn, expired)["locked_until"] is None
    assert job_row(dsn, live)["status"] == "running"
    assert timed.reap_expired() == []
    (again,) = timed.claim("default", batch=1, lease=LEASE)
    assert (again.id, again.attempts) == (expired, 2)


def test_purge_deletes_only_old_finished_jobs_in_batches(
    dsn: str, timed: JobStore, clock: FakeClock
) -> None:
    ids = seed(timed, 25)
    old = timed.claim("default", batch=20, lease=LEASE)
    timed.complete_many(old[:15])
    for job in old[15:]:
        timed.fail(job.id, job.attempts, "bad", permanent=True)
    clock.advance(8 * 86_400)
    recent = timed.claim("default", batch=2, lease=LEASE)  # running: never purged
    timed.complete_many(recent[:1])  # done, but recent
    purges, every = ["-- job_purge_finished:%"], ["-- %"]  # pgkick's statements' first line
    before = statement_calls(dsn, purges), statement_calls(dsn, every)
    assert timed.purge_finished(timedelta(days=7), batch=6) == 20
    # batches of 6, 6, 6, then 2: the last one says it is done; and no other statement
    after = statement_calls(dsn, purges), statement_calls(dsn, every)
    assert (after[0] - before[0], after[1] - before[1]) == (4, 4)
    remaining = {
        row[0]: row[1]
        for row in timed.conn.execute("SELECT id, status FROM pgkick.jobs ORDER BY id").fetchall()
    }
    assert set(remaining) == set(ids[20:])
    assert sorted(remaining.values()) == ["done", "queued", "queued", "queued", "running"]
