"""Bulk actions by filter (issue 33 item 6): `pgkick retry|cancel|purge` with `pgkick jobs`'
filters and more, counted first, acted on with --yes a batch per transaction; the Python API
(pgkick.cli.bulk) the same, on real PostgreSQL."""

from __future__ import annotations

import json
import signal
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgkick import cli
from pgkick.cli import bulk, operations
from pgkick.errors import InvalidArgument, UsageError
from pgkick.producer.enqueue import Enqueuer
from pgkick.store import queries
from pgkick.store.operator import OperatorStore
from pgkick.validation import JobSpec
from tests.helpers import job_row, seed, wait_for_lock_waiters
from tests.store import JobStore

LEASE = timedelta(minutes=5)


@pytest.fixture(autouse=True)
def no_kicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr("pgkick.kick.default._default", None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def insert(store: JobStore, count: int, *, task: str = "t", queue: str = "q") -> list[int]:
    spec = JobSpec(queue, task, "{}", None, timedelta(0), 1)
    return [job.id for job in store.insert_many([[spec] * count])]


def fail_all(store: JobStore, queue: str, error: str) -> list[int]:
    """Claim every ready job of the queue and fail it for good with `error`."""
    jobs = store.claim(queue, batch=1000, lease=LEASE)
    for job in jobs:
        store.fail(job.id, job.attempts, error, permanent=True)
    return sorted(job.id for job in jobs)


def rows(dsn: str, ids: list[int]) -> dict[int, tuple[str, Any, str]]:
    """id -> (status, cancel_requested_at, xmin: the transaction that last wrote the row)."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT id, status, cancel_requested_at, xmin::text FROM pgkick.jobs "
            "WHERE id = ANY(%s)",
            (ids,),
        ).fetchall()
    return {row[0]: (row[1], row[2], row[3]) for row in found}


def test_retry_by_error_text_counts_first_then_retries_only_those_a_batch_per_transaction(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a bulk retry that acts without --yes, takes jobs outside the filter (another
    task, another error, a queued job), or changes them all in one long transaction: 25
    jobs in batches of 10 are written by 3 transactions (their rows' xmin)."""
    with JobStore.open(dsn) as store:
        insert(store, 25, task="t")
        timeouts = fail_all(store, "q", "TimeoutError: upstream took 31 s")
        insert(store, 5, task="t")
        other_error = fail_all(store, "q", "KeyError: 'sku'")
        other_task = insert(store, 5, task="u")
        fail_all(store, "q", "TimeoutError: again")
        queued = insert(store, 3, task="t")
    before = rows(dsn, timeouts + other_error + queued)
    argv = ["retry", "--task", "t", "--error", "timeouterror", "--batch", "10", "--dsn", dsn]
    code, out, _ = run(capsys, *argv)
    assert (code, out["would_retry"], out["by_status"]) == (0, 25, {"failed": 25})
    assert out["dry_run"] is True
    assert rows(dsn, timeouts + other_error + queued) == before  # nothing written
    code, out, _ = run(capsys, *argv, "--yes")
    assert (code, out) == (0, {"retried": 25, "revived_dependants": 0})
    after = rows(dsn, timeouts + other_error + other_task + queued)
    assert {i for i, (status, _, _) in after.items() if status == "queued"} == set(
        timeouts + queued
    )
    assert len({after[i][2] for i in timeouts}) == 3  # ceil(25 / 10) transactions


def test_bulk_cancel_fails_queued_jobs_and_requests_cancel_of_running_ones_in_the_range(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a cancel that fails running jobs outright (they must get the cancel request
    and keep running until their task stops) or that ignores the created range."""
    with JobStore.open(dsn) as store:
        old = insert(store, 4)
        store.conn.execute(
            "UPDATE pgkick.jobs SET created_at = now() - interval '2 days' WHERE id = ANY(%s)",
            (old,),
        )
        recent = insert(store, 6)
        store.conn.execute(
            "UPDATE pgkick.jobs SET run_at = now() + interval '1 hour' WHERE id = ANY(%s)",
            (old + recent[2:],),
        )
        running = [job.id for job in store.claim("q", batch=10, lease=LEASE)]
    assert running == recent[:2]
    argv = ["cancel", "--queue", "q", "--since", "1d", "--dsn", dsn]
    code, out, _ = run(capsys, *argv)
    assert (out["would_cancel"], out["by_status"]) == (6, {"queued": 4, "running": 2})
    code, out, _ = run(capsys, *argv, "--yes")
    assert (code, out) == (0, {"cancelled": 4, "cancelling": 2})
    after = rows(dsn, old + recent)
    assert [after[i][0] for i in old] == ["queued"] * 4  # created before the range
    assert [after[i][0] for i in recent[2:]] == ["failed"] * 4
    assert all(after[i][0] == "running" and after[i][1] is not None for i in running)


def test_bulk_purge_deletes_only_finished_jobs_of_the_filter(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a purge by filter that deletes a job of another status or task."""
    with JobStore.open(dsn) as store:
        done = insert(store, 3, task="report")
        store.complete_many(store.claim("q", batch=10, lease=LEASE))
        failed = insert(store, 2, task="report")
        fail_all(store, "q", "boom")
        kept = insert(store, 2, task="report") + insert(store, 2, task="other")
    argv = ["purge", "--task", "report", "--status", "done", "--dsn", dsn]
    assert run(capsys, *argv)[1]["would_purge"] == 3
    assert run(capsys, *argv, "--yes")[1] == {"purged": 3}
    assert set(rows(dsn, done + failed + kept)) == set(failed + kept)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["retry", "--status", "queued"], "retry applies to failed jobs"),
        (["purge", "--status", "running"], "purge applies to done or failed jobs"),
        (["cancel", "1", "--status", "queued"], "ids or give filters, not both"),
        (["cancel", "1", "--queue", "other"], "ids or give --queue/--task/--all, not both"),
        (["retry", "2", "--task", "t"], "ids or give --queue/--task/--all, not both"),
        (["purge", "--older-than", "7d", "--task", "t"], "give the created range as --until"),
        (["cancel", "--dry-run"], "give a filter, or --all"),
        (["retry", "--since", "yesterday"], "expected an ISO time"),
        (["retry", "--since", "2026-01-01T00:00"], "give its offset"),
        (["retry", "--since", "1d", "--until", "2d"], "is not before until"),
        (["cancel", "--queue", "q", "--batch", "0"], "must be at least 1"),
        (["purge", "--task", "t", "--batch", "20000", "--yes"], "1..10000"),
    ],
)
def test_bad_bulk_input_is_refused_and_writes_nothing(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with JobStore.open(dsn) as store:
        insert(store, 2)
        store.complete_many(store.claim("q", batch=1, lease=LEASE))
        before = rows(dsn, [1, 2])
    try:
        code, _, err = run(capsys, *argv, "--dsn", dsn, "--yes")
    except SystemExit as exit_info:  # the parser's refusals: exit 2, one line as the others
        code, err = exit_info.code, capsys.readouterr().err
    assert code != 0 and message in err and err.count("\n") == 1
    assert rows(dsn, [1, 2]) == before


def test_the_python_api_counts_and_refuses_a_retry_that_would_break_a_unique_key(
    dsn: str,
) -> None:
    """Catches a bulk retry that writes some batches before finding a unique-key conflict
    in a later one: refused whole, nothing written."""
    with JobStore.open(dsn) as store:
        spec = JobSpec("q", "t", "{}", None, timedelta(0), 1, unique_key="k")
        insert(store, 5)
        store.insert_unique(spec)
        failed = fail_all(store, "q", "boom")
        store.insert_unique(spec)  # a live job holds "k" again
        before = rows(dsn, failed)
        selection = bulk.JobSelection(queue="q", since=datetime.now(UTC) - timedelta(hours=1))
        ops = OperatorStore(store.conn, store.clock)
        assert bulk.count_matching(ops, selection, "retry") == {"failed": 6}
        with pytest.raises(UsageError, match="unique key 'k' is held by queued job"):
            bulk.retry_matching(ops, selection, batch=2)
        assert rows(dsn, failed) == before
        with pytest.raises(InvalidArgument, match="timezone-aware"):
            bulk.JobSelection(since=datetime(2026, 1, 1))


def test_pgkick_jobs_lists_with_the_filters_a_bulk_action_counts(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick jobs` ignoring --error, --since or --until: it must list exactly the
    jobs the bulk retry with the same filters counts."""
    with JobStore.open(dsn) as store:
        insert(store, 3)
        timeouts = fail_all(store, "q", "upstream TIMEOUT")
        insert(store, 2)
        fail_all(store, "q", "KeyError")
        store.conn.execute(
            "UPDATE pgkick.jobs SET created_at = now() - interval '3 days' WHERE id = %s",
            (timeouts[0],),
        )
    filters = ["--error", "timeout", "--since", "2d", "--dsn", dsn]
    listed = [job["id"] for job in run(capsys, "jobs", *filters)[1]["jobs"]]
    assert sorted(listed) == timeouts[1:]
    assert run(capsys, "retry", *filters)[1]["would_retry"] == 2
    old = [job["id"] for job in run(capsys, "jobs", "--until", "2d", "--dsn", dsn)[1]["jobs"]]
    assert old == [timeouts[0]]


def test_a_bulk_selection_filters_on_every_field_a_listing_filters_on() -> None:
    """Catches a filter added to JobFilter and to the listing's statement (job_list_page)
    but not to the bulk selection's (job_id_page_matching): psycopg ignores a parameter
    a statement does not name, so `pgkick purge --X` would take jobs `pgkick jobs --X`
    does not list. Each filter is the same condition, word for word, in both."""
    listing = queries.JOB_LIST_PAGE.splitlines()
    selecting = queries.JOB_ID_PAGE_MATCHING.splitlines()
    own = ("statuses", "attempts_below")  # the action's, not a filter's (a retry's limit)
    names = [name for name in bulk.JobSelection().params("purge") if name not in own]
    assert {*names, "status"} == set(bulk.JobSelection().as_params())  # status: its own
    for name in names:
        placeholder = f"%({name})s"
        in_listing = [line.strip() for line in listing if placeholder in line]
        in_selecting = [line.strip() for line in selecting if placeholder in line]
        assert len(in_listing) == 1 and in_listing == in_selecting, (name, in_selecting)


def test_a_retry_that_waited_for_another_retry_and_its_claim_changes_nothing(dsn: str) -> None:
    """Two retries of one failed job at once: the first, in a transaction that also claims
    the job, holds the row; the second waits for it (seen waiting, not slept for). Catches
    the retry statement checking `failed` only on its snapshot: after the wait it put the
    running job back to queued, and the claim's run would be followed by another."""
    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1, max_attempts=1)
        store.conn.execute(
            "UPDATE pgkick.jobs SET status = 'failed', attempts = 1, finished_at = now()"
            " WHERE id = %s",
            (job_id,),
        )
    second: list[list[tuple[int, str]]] = []

    def retry_again() -> None:
        with OperatorStore.open(dsn) as other:
            second.append(other.retry_failed(ids=[job_id], queue=None, task=None, extra_attempts=1))

    with JobStore.open(dsn) as first, first.transaction():
        assert first.retry_failed(ids=[job_id], queue=None, task=None, extra_attempts=1)
        waiting = threading.Thread(target=retry_again)
        waiting.start()
        wait_for_lock_waiters(dsn)
        (claimed,) = first.claim("default", batch=1, lease=timedelta(minutes=5))
    waiting.join(30)
    assert claimed.id == job_id and second == [[]]
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempts"], row["max_attempts"]) == ("running", 2, 2)


class Racing(OperatorStore):
    """A bulk action's store that, once its selection is read, lets `meanwhile` run in
    another session before the first write: what an operator and a worker do between
    the count and the batch (no sleep: the race is played in order)."""

    meanwhile: Any = None

    def ids_matching(self, filters: dict[str, Any], *, after: int, limit: int) -> list[Any]:
        found = super().ids_matching(filters, after=after, limit=limit)
        if Racing.meanwhile is not None:
            Racing.meanwhile, act = None, Racing.meanwhile
            act()
        return found


def test_a_bulk_purge_skips_a_job_retried_and_run_to_done_since_it_was_selected(
    dsn: str,
) -> None:
    """Catches the purge's delete re-checking only 'done or failed': `purge --status failed
    --error Boom` deleted a job another operator retried and a worker ran to done between
    the selection and the delete (the docs: a job that moved since it was counted is
    skipped). Its sibling, still failed with Boom, is purged."""
    with JobStore.open(dsn) as store:
        moved, kept = insert(store, 2)
        fail_all(store, "q", "PermanentError: Boom")

    def retried_and_run() -> None:
        with JobStore.open(dsn) as other:
            operations.retry(OperatorStore(other.conn, other.clock), ids=[moved])
            (job,) = other.claim("q", batch=1, lease=LEASE)
            assert other.complete(job.id, job.attempts)

    Racing.meanwhile = retried_and_run
    with Racing.open(dsn) as store:
        purged = bulk.purge_matching(store, bulk.JobSelection(status="failed", error="boom"))
    assert sorted(purged) == [kept]
    assert rows(dsn, [moved, kept]).keys() == {moved} and job_row(dsn, moved)["status"] == "done"


def test_a_bulk_purge_of_a_failed_chain_deletes_it_whole_dependants_first(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A parent is left while a dependant is not done (job_delete_finished_among: retried,
    the dependant would run as if that parent had never been); the dependants selected too
    go in the same purge, so the parents left are passed again: a failed chain selected
    whole (batches of one, in id order: the parents first) goes whole. An unselected failed
    dependant keeps its parent."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        head = enqueue({}, task="t", queue="q")
        middle = enqueue({}, task="t", queue="q", after=[head])
        tail = enqueue({}, task="t", queue="q", after=[middle])
        other = enqueue({}, task="t", queue="q")
        kept = enqueue({}, task="u", queue="q", after=[other])
        fail_all(store, "q", "PermanentError: Boom")
    argv = ["purge", "--task", "t", "--status", "failed", "--batch", "1", "--dsn", dsn]
    assert run(capsys, *argv, "--yes")[1] == {"purged": 3}
    assert sorted(rows(dsn, [head, middle, tail, other, kept])) == [other, kept]


def test_a_bulk_retry_by_error_skips_a_job_that_failed_again_with_another_error(
    dsn: str,
) -> None:
    """Catches the retry's statement re-checking only 'failed': `retry --error Boom` put
    back a job that, since it was selected, was retried by someone else and failed again
    with another error (outside the selection as it is written)."""
    with JobStore.open(dsn) as store:
        moved, kept = insert(store, 2)
        fail_all(store, "q", "PermanentError: Boom")

    def retried_and_failed_otherwise() -> None:
        with JobStore.open(dsn) as other:
            operations.retry(OperatorStore(other.conn, other.clock), ids=[moved])
            (job,) = other.claim("q", batch=1, lease=LEASE)
            other.fail(job.id, job.attempts, "KeyError: 'sku'", permanent=True)

    Racing.meanwhile = retried_and_failed_otherwise
    with Racing.open(dsn) as store:
        retried = bulk.retry_matching(store, bulk.JobSelection(error="boom"))
    assert retried.jobs == [(kept, "q")]
    assert job_row(dsn, moved)["status"] == "failed" and job_row(dsn, kept)["status"] == "queued"


class QueueKicks:
    def __init__(self) -> None:
        self.queues: list[str] = []

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.queues.append(queue)


def test_a_bulk_retry_that_meets_a_key_taken_midway_kicks_what_it_retried_and_says_so(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a bulk retry that, when a producer enqueues a failed job's key after the
    whole selection's check (before that job's batch), dies on the raw unique violation
    (exit 2) and leaves the batches it committed queued but never kicked: the kick ran
    only after every batch. Now each batch's queues are kicked after its commit, and the
    refusal is the check's one line, naming the key and how many were retried first."""
    with JobStore.open(dsn) as store:
        (first,) = insert(store, 1)
        keyed = store.insert_unique(JobSpec("q", "t", "{}", None, timedelta(0), 1, unique_key="k"))[
            0
        ].id
        fail_all(store, "q", "boom")
    kicks = QueueKicks()
    monkeypatch.setattr("pgkick.kick.default._default", kicks)
    real = OperatorStore.retry_failed
    batches: list[Any] = []

    def racing(self: OperatorStore, **kw: Any) -> list[tuple[int, str]]:
        batches.append(kw["ids"])
        if len(batches) == 2:  # a producer takes the key after the first batch's commit
            with JobStore.open(dsn) as producer:
                producer.insert_unique(
                    JobSpec("q", "t", "{}", None, timedelta(0), 1, unique_key="k")
                )
        return real(self, **kw)

    monkeypatch.setattr(OperatorStore, "retry_failed", racing)
    argv = ["retry", "--queue", "q", "--status", "failed", "--yes", "--batch", "1"]
    code, _, err = run(capsys, *argv, "--dsn", dsn)
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("pgkick retry: retried 1 job(s) (queued again, their queues kicked)")
    assert f"job {keyed}'s unique key 'k' is held by queued job" in err, err
    assert job_row(dsn, first)["status"] == "queued" and kicks.queues == ["q"]
    assert job_row(dsn, keyed)["status"] == "failed"


def test_a_retry_dry_run_does_not_count_jobs_that_used_every_attempt(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a dry run that counts failed jobs which used all 1,000 attempts: the retry's
    own statement skips them (they stay failed), so it said `would_retry: 3` and then
    `retried: 1` (a review of the CLI, F1)."""
    with JobStore.open(dsn) as store:
        insert(store, 3)
        exhausted, kept, _ = fail_all(store, "q", "TimeoutError: upstream")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgkick.jobs SET attempts = 1000, max_attempts = 1000 WHERE id <> %s", (kept,)
        )
    argv = ("retry", "--task", "t", "--status", "failed", "--dsn", dsn)
    _, counted, _ = run(capsys, *argv)
    code, acted, _ = run(capsys, *argv, "--yes")
    assert code == 0 and acted["retried"] == 1
    assert counted["would_retry"] == acted["retried"]
    assert rows(dsn, [exhausted])[exhausted][0] == "failed"


def test_a_bulk_cancel_stopped_by_ctrl_c_says_how_far_it_got(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a Ctrl-C in the middle of a bulk action that printed a KeyboardInterrupt
    traceback, no JSON document, and no word of the batches it had committed (a review of
    the CLI, F2): the batch under way finishes, then one line with the count done, exit 130;
    the rest wait as they were."""
    with JobStore.open(dsn) as store:
        ids = insert(store, 25)
    cancel, calls = operations.cancel, []

    def ctrl_c_in_the_second_batch(store: OperatorStore, **kw: Any) -> operations.Cancelled:
        calls.append(kw)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return cancel(store, **kw)

    monkeypatch.setattr(operations, "cancel", ctrl_c_in_the_second_batch)
    before = signal.getsignal(signal.SIGINT)  # (SIG_IGN in a process started with nohup &)
    argv = ("cancel", "--queue", "q", "--status", "queued", "--batch", "5", "--yes")
    code, document, err = run(capsys, *argv, "--dsn", dsn)
    assert code == 130 and err.count("\n") == 1
    assert "cancelled or marked 10 of the 25 jobs selected" in err
    assert document == {"error": err.removeprefix("pgkick cancel: ").strip()}
    statuses = sorted(status for status, _, _ in rows(dsn, ids).values())
    assert statuses == ["failed"] * 10 + ["queued"] * 15
    assert signal.getsignal(signal.SIGINT) is before  # given back


def test_a_purge_dry_run_refuses_the_batch_its_action_would_refuse(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a filtered purge whose count took `--batch 20000` and said 'run it again with
    --yes', which then refused it ('batch: ...', not naming the option): both refuse it,
    naming --batch (a review of the CLI, F5)."""
    with JobStore.open(dsn) as store:
        insert(store, 2)
        fail_all(store, "q", "KeyError")
    for extra in ((), ("--yes",)):
        code, document, err = run(
            capsys, "purge", "--task", "t", "--batch", "20000", *extra, "--dsn", dsn
        )
        assert code == 2 and "--batch 20000" in err and "1..10000" in err and "error" in document
    assert sorted(rows(dsn, [1, 2])) == [1, 2]


@pytest.mark.parametrize("batch", ["1", "10000"])
def test_purge_older_than_takes_an_old_failed_chain_whole_as_its_dry_run_counts(
    dsn: str, capsys: pytest.CaptureFixture[str], batch: str
) -> None:
    """Catches `purge --older-than` answering by its batch: an old failed chain was counted
    one level (the dry run left its parents out), purged whole with `--batch 1` (a full
    batch ran the next statement, which found the dependant gone) and one level with the
    default batch (a short one stopped there). Now the chain goes whole, dependants first,
    whatever the batch, and the dry run counts that; a parent whose failed dependant is too
    recent to purge stays (a review of the reaper, F1)."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        head = enqueue({}, task="t", queue="q")
        middle = enqueue({}, task="t", queue="q", after=[head])
        tail = enqueue({}, task="t", queue="q", after=[middle])
        other = enqueue({}, task="t", queue="q")
        recent = enqueue({}, task="t", queue="q", after=[other])
        fail_all(store, "q", "PermanentError: Boom")
        (plain,) = insert(store, 1, queue="p")
        store.complete_many(store.claim("p", batch=1, lease=LEASE))
        store.conn.execute(
            "UPDATE pgkick.jobs SET finished_at = now() - interval '2 days' WHERE id <> %s",
            (recent,),
        )
    argv = ["purge", "--older-than", "1d", "--dsn", dsn]
    counted = run(capsys, *argv, "--dry-run")[1]
    assert (counted["would_purge"], counted["by_status"]) == (4, {"done": 1, "failed": 3})
    assert run(capsys, *argv, "--batch", batch)[1] == {"purged": 4}
    assert sorted(rows(dsn, [head, middle, tail, other, recent, plain])) == [other, recent]


def test_purge_keeps_a_throttled_keys_newest_job_through_the_longest_throttle(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches retention breaking a throttle longer than it (periods up to 30 days): the
    key's job, done 8 days ago, was purged at 7, and an enqueue of the key on day 8 wrote
    a second job inside the 10-day period. The newest job of a unique key stays until it
    is 30 days old; older ones of the key go (a review of the reaper, F4)."""
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        older = enqueue({}, task="t", queue="q", unique_key="k", throttle=86400)
        store.complete_many(store.claim("q", batch=1, lease=LEASE))
        store.conn.execute("UPDATE pgkick.jobs SET created_at = created_at - interval '11 days'")
        first = enqueue({}, task="t", queue="q", unique_key="k", throttle=10 * 86400)
        (plain,) = insert(store, 1)
        store.complete_many(store.claim("q", batch=2, lease=LEASE))
        store.conn.execute(
            "UPDATE pgkick.jobs SET created_at = created_at - interval '8 days',"
            " finished_at = now() - interval '8 days'"
        )
    argv = ["purge", "--older-than", "7d", "--dsn", dsn]
    assert run(capsys, *argv, "--dry-run")[1]["would_purge"] == 2
    assert run(capsys, *argv)[1] == {"purged": 2}
    assert sorted(rows(dsn, [older, first, plain])) == [first]
    with JobStore.open(dsn) as store:
        enqueue = Enqueuer(store).enqueue
        again = enqueue({}, task="t", queue="q", unique_key="k", throttle=10 * 86400)
    assert again == first


@pytest.mark.parametrize(
    ("action", "form"),
    [
        ("cancel", ("--task", "t")),
        ("cancel", ("--queue", "q")),
        ("cancel", ("--all",)),
        ("retry", ("--task", "t")),
        ("retry", ("--queue", "q")),
        ("retry", ("--all",)),
    ],
)
def test_the_older_bulk_forms_act_a_batch_per_transaction_as_the_filtered_ones(
    dsn: str, capsys: pytest.CaptureFixture[str], action: str, form: tuple[str, ...]
) -> None:
    """Catches `pgkick cancel --task X` (and --queue, --all; retry's the same) changing every
    job in one statement, one transaction holding its locks to the end, while the docs
    promise batches that no lock outlives: 25 jobs in batches of 10 are written by 3
    transactions (their rows' xmin), acted on at once as before (no --yes), what the dry
    run counted; a job of another task or queue stays as it was."""
    with JobStore.open(dsn) as store:
        ids = insert(store, 25)
        if action == "retry":
            fail_all(store, "q", "KeyError")
        (other,) = insert(store, 1, task="u", queue="p")
        if action == "retry":
            fail_all(store, "p", "KeyError")
    argv = (action, *form, "--batch", "10", "--dsn", dsn)
    if form == ("--all",):
        ids.append(other)
    counted = run(capsys, *argv, "--dry-run")[1]
    assert counted["would_" + action] == len(ids)
    code, document, _ = run(capsys, *argv)
    done = document["cancelled" if action == "cancel" else "retried"]
    assert code == 0 and sorted(done) == sorted(ids)
    written = rows(dsn, ids)
    assert len({xmin for _, _, xmin in written.values()}) == -(-len(ids) // 10)
    if form != ("--all",):
        assert rows(dsn, [other])[other][0] == ("queued" if action == "cancel" else "failed")


def test_an_older_bulk_form_stopped_by_ctrl_c_says_how_far_it_got(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `pgkick cancel --queue q` alone unwinding on a KeyboardInterrupt (one
    transaction: nothing or everything) rather than finishing its batch and saying how far
    it got, as the filtered form does: exit 130, one line, the rest as they were."""
    with JobStore.open(dsn) as store:
        ids = insert(store, 25)
    cancel, calls = operations.cancel, []

    def ctrl_c_in_the_second_batch(store: OperatorStore, **kw: Any) -> operations.Cancelled:
        calls.append(kw)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return cancel(store, **kw)

    monkeypatch.setattr(operations, "cancel", ctrl_c_in_the_second_batch)
    code, _, err = run(capsys, "cancel", "--queue", "q", "--batch", "5", "--dsn", dsn)
    assert code == 130 and "cancelled or marked 10 of the 25 jobs selected" in err
    statuses = sorted(status for status, _, _ in rows(dsn, ids).values())
    assert statuses == ["failed"] * 10 + ["queued"] * 15


def test_purge_older_than_stopped_by_ctrl_c_says_how_many_it_purged(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `purge --older-than` stopped by a Ctrl-C saying "the transaction under way
    was rolled back, nothing of it written" while the batches before it were committed
    (one statement each): the statement under way finishes, then one line with how many
    were purged, exit 130, as the other bulk forms; the rest stay."""
    with JobStore.open(dsn) as store:
        ids = insert(store, 25)
        store.complete_many(store.claim("q", batch=25, lease=LEASE))
        store.conn.execute("UPDATE pgkick.jobs SET finished_at = now() - interval '2 days'")
    one, statements = OperatorStore.one, []

    def ctrl_c_in_the_second_batch(store: OperatorStore, query: Any, **params: Any) -> Any:
        if query == queries.JOB_PURGE_FINISHED:
            statements.append(params)
            if len(statements) == 2:
                signal.raise_signal(signal.SIGINT)
        return one(store, query, **params)

    monkeypatch.setattr(OperatorStore, "one", ctrl_c_in_the_second_batch)
    argv = ("purge", "--older-than", "1d", "--batch", "5", "--dsn", dsn)
    code, document, err = run(capsys, *argv)
    assert code == 130 and err.count("\n") == 1, err
    assert "purged 10 jobs" in err and "committed" in err
    assert document == {"error": err.removeprefix("pgkick purge: ").strip()}
    assert len(rows(dsn, ids)) == 15
