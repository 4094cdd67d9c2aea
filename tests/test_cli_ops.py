"""The operator commands' rough edges a walkthrough found: `--json` on failure, `pgkick
resume` of a queue never paused, `pgkick limit QUEUE` alone, the rate limit's refusal."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from pgkick import cli
from pgkick.config import Settings
from pgkick.errors import MisuseError
from pgkick.store.worker import ClaimedJob
from pgkick.worker.runtime import Runtime
from tests.helpers import job_row, seed
from tests.store import JobStore
from tests.test_bulk import no_kicks  # noqa: F401 (an autouse fixture)
from tests.test_producer import RecordingKicker
from tests.test_security import login_as  # noqa: F401  (a fixture)

LEASE = timedelta(minutes=5)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    out = json.loads(captured.out) if "--json" in argv and captured.out else captured.out
    return code, out, captured.err


def _fail_the_next_job(dsn: str, error: str) -> threading.Thread:
    """A worker, on its own connection, that fails the first job it claims for good."""

    def work() -> None:
        with JobStore.open(dsn) as store:
            for _ in range(200):
                jobs = store.claim("default", batch=1, lease=LEASE)
                if jobs:
                    store.fail(jobs[0].id, jobs[0].attempts, error, permanent=True)
                    return
                time.sleep(0.05)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_enqueue_json_prints_its_failure_as_one_json_object(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick enqueue --json` printing nothing on stdout when it fails: a script
    reading its JSON got no document, and for a job that failed while the command waited,
    not even the id it enqueued. The line on stderr stays."""
    code, out, err = run(capsys, "enqueue", "noop", "--payload", "{no", "--dsn", dsn, "--json")
    assert code == 2 and err.startswith("pgkick enqueue: --payload is not JSON")
    assert out == {"error": err.removeprefix("pgkick enqueue: ").strip()}

    worker = _fail_the_next_job(dsn, "ValueError: card declined")
    code, out, err = run(capsys, "enqueue", "noop", "--wait", "10", "--dsn", dsn, "--json")
    worker.join()
    assert code == 1 and "card declined" in err
    assert out["status"] == "failed" and isinstance(out["id"], int)
    assert out["error"] == err.removeprefix("pgkick enqueue: ").strip()
    assert f"job {out['id']} failed" in out["error"]


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | str | None, str]:
    """The exit status and stderr of a command refused, by the parser (SystemExit) or not."""
    try:
        code: int | str | None = cli.main(list(argv))
    except SystemExit as exited:
        code = exited.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "remedy"),
    [
        (["--rate", "0/1m"], "--no-rate"),
        (["--rate", "9999999999/1m"], "--no-rate"),
        (["3000000000"], "pgkick limit mail --clear"),
        (["--concurrency", "0"], "--no-concurrency"),
        (["--concurrency", "2147483648"], "--no-concurrency"),
    ],
)
def test_a_limit_out_of_range_is_refused_in_words_not_with_a_python_none(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], remedy: str
) -> None:
    """Catches `pgkick limit mail --rate 0/1m` answering "rate: 0 is outside 1..2147483647
    (None: no limit)": an operator types no None; the refusal says how to remove a limit
    with the command's own words, and writes nothing."""
    code, err = _refusal(capsys, "limit", "mail", *argv, "--dsn", dsn)
    assert code not in (0, None) and err.count("\n") == 1, err
    assert "None" not in err and remedy in err, err
    assert cli.main(["limit", "--dsn", dsn, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"limits": []}


def test_limit_concurrency_takes_what_the_api_takes(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick limit --concurrency` capped at 10**9 while set_queue_concurrency (and
    the column) take up to 2**31 - 1: the command refused a value the API sets."""
    assert cli.main(["limit", "mail", "--concurrency", "2147483647", "--dsn", dsn]) == 0
    capsys.readouterr()
    assert (
        run(capsys, "limit", "mail", "--dsn", dsn, "--json")[1]["limits"][0]["concurrency"]
        == 2147483647
    )


def test_limit_with_only_a_queue_shows_that_queues_limits(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `pgkick limit mail` refused ("give QUEUE and N, --rate ..."): with no change
    asked it shows the queue's limits, read-only, as `pgkick limit` lists every queue's."""
    for argv in (["mail", "2", "--rate", "10/1m"], ["other", "--concurrency", "3"]):
        assert cli.main(["limit", *argv, "--dsn", dsn]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "limit", "--dsn", dsn, "--json")
    (mail,) = [row for row in out["limits"] if row["queue"] == "mail"]
    assert run(capsys, "limit", "mail", "--dsn", dsn, "--json") == (0, {"limits": [mail]}, "")
    assert run(capsys, "limit", "quiet", "--dsn", dsn, "--json") == (0, {"limits": []}, "")
    code, out, err = run(capsys, "limit", "quiet", "--dsn", dsn)
    assert (code, out, err) == (0, "limits: none\n", "")
    assert run(capsys, "limit", "--dsn", dsn, "--json")[1]["limits"] == [
        mail,
        {
            **mail,
            "queue": "other",
            "max_running": None,
            "rate": None,
            "concurrency": 3,
            "rate_period_seconds": None,
        },
    ]


def test_resume_of_a_queue_never_paused_says_so_and_neither_writes_nor_kicks(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `pgkick resume mail` answering `resumed: mail` (and kicking it) for a queue
    that was never paused: it says the queue was not paused, exit 0, and changes nothing;
    a paused queue is resumed and kicked once, as before."""
    kicker = RecordingKicker()
    monkeypatch.setattr("pgkick.kick.default._default", kicker)
    code, out, err = run(capsys, "resume", "mail", "--dsn", dsn, "--json")
    assert (code, out, err) == (0, {"not_paused": "mail", "kicked": False}, "")
    code, out, _ = run(capsys, "resume", "mail", "--dsn", dsn)
    assert (code, out) == (0, "not_paused: mail\nkicked: False\n")
    assert kicker.kicks == []
    assert run(capsys, "pause", "mail", "--dsn", dsn, "--json")[0] == 0
    code, out, _ = run(capsys, "resume", "mail", "--dsn", dsn, "--json")
    assert (code, out) == (0, {"resumed": "mail", "kicked": True})
    assert kicker.kicks == [("mail", "manual")]
    assert run(capsys, "resume", "mail", "--dsn", dsn, "--json")[1]["not_paused"] == "mail"
    assert run(capsys, "limit", "--dsn", dsn, "--json")[1] == {"limits": []}


@pytest.mark.parametrize("kick_fails", [False, True], ids=["kicked", "kick failed"])
def test_an_operators_kick_is_followed_by_its_safety_or_replaced_by_a_wake_up(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    kick_fails: bool,
) -> None:  # fmt: skip
    """`pgkick resume` and `pgkick retry` kick after their commit. Catches (a review) a kick
    that raised only logged, and a kick sent with no safety wake-up, as every other sender
    books: a kick lost or failed on a quiet day left the jobs to the daily reaper."""
    kicker = RecordingKicker(fail=kick_fails)
    monkeypatch.setattr("pgkick.kick.default._default", kicker)
    monkeypatch.setenv("PGKICK_KICK_SAFETY_MS", "60000")  # the default (the suite's is 0)
    assert run(capsys, "pause", "ops", "--dsn", dsn, "--json")[0] == 0
    code, out, _ = run(capsys, "resume", "ops", "--dsn", dsn, "--json")
    assert (code, out) == (0, {"resumed": "ops", "kicked": not kick_fails})
    with JobStore.open(dsn) as store:
        seed(store, 1, queue="mail")
        (job,) = store.claim("mail", batch=1, lease=timedelta(minutes=5))
        store.fail(job.id, job.attempts, "boom", permanent=True)
    assert run(capsys, "retry", str(job.id), "--dsn", dsn, "--json")[0] == 0
    # a safety a minute after the kick, noted before it is sent; and for a kick that
    # failed, a wake-up at once too (Scheduler's next minute)
    expected = ["ops", "ops", "mail", "mail"] if kick_fails else ["ops", "mail"]
    assert [queue for queue, _ in kicker.wakes] == expected


def _expired_lease(dsn: str) -> ClaimedJob:
    """A job claimed, whose lease ran out a minute ago: what a reaper re-queues."""
    with JobStore.open(dsn) as store:
        seed(store, 1)
        (job,) = store.claim("default", batch=1, lease=LEASE)
        store.execute(
            "UPDATE pgkick.jobs SET locked_until = now() - interval '1 minute' WHERE id = %(id)s",
            id=job.id,
        )
    return job


def test_reap_as_a_role_that_may_not_purge_refuses_before_writing_or_kicking(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811  (the fixture imported above)
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches `pgkick reap` as pgkick_worker re-queueing an expired lease and kicking its
    queue, then failing at the purge with "permission denied for table jobs": the command
    checks the role first and refuses in one line naming pgkick_maintainer, having written
    and kicked nothing; as pgkick_maintainer the same run reaps."""
    kicker = RecordingKicker()
    monkeypatch.setattr("pgkick.kick.default._default", kicker)
    job = _expired_lease(dsn)
    code, out, err = run(capsys, "reap", "--dsn", login_as["worker"])
    assert code != 0 and err.count("\n") == 1 and "pgkick_maintainer" in err, err
    assert "permission denied" not in err and out == ""
    assert job_row(dsn, job.id)["status"] == "running" and kicker.kicks == []
    code, out, err = run(capsys, "reap", "--dsn", login_as["maintainer"], "--json")
    assert (code, out["requeued"]) == (0, 1), err
    assert job_row(dsn, job.id)["status"] == "queued" and kicker.kicks == [("default", "reaper")]


@pytest.mark.parametrize(
    "argv",
    [
        ["enqueue", "noop", "--payload", "{no"],
        ["enqueue", "noop", "--delay", "nan"],
        ["enqueue", "noop", "--max-attempts", "0"],
        ["enqueue", "noop", "--wait", "-1"],
        ["limit", "mail", "0"],
        ["limit", "mail", "--concurrency", "0"],
        ["limit", "mail", "--rate", "0/1m"],
    ],
)
def test_a_bad_value_exits_2_whichever_check_refuses_it(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Catches the exit status of a bad value depending on which layer refused it: `enqueue
    --payload '{no'` and `limit mail 0` exited 1, `--delay nan`, `--max-attempts 0`,
    `--concurrency 0` and the parser's own refusals 2. The docs: 1 is the request refused
    as it stands, 2 the input or the database."""
    code, err = _refusal(capsys, *argv, "--dsn", dsn)
    assert code == 2 and err.count("\n") == 1, err


def test_the_reaper_lambdas_run_as_a_role_that_may_not_purge_refuses_before_writing(
    dsn: str,
    login_as: dict[str, str],  # noqa: F811  (the fixture imported above)
) -> None:
    """Catches the check made by `pgkick reap` alone: the reaper Lambda's run (Runtime.reap,
    pgkick.aws.reaper) as pgkick_worker re-queued an expired lease and kicked, then failed at
    the purge. The check is the reaper's own now: refused, nothing written or kicked."""
    job = _expired_lease(dsn)
    kicker = RecordingKicker()
    runtime = Runtime(Settings.from_env({}), kicker, dsn=lambda: login_as["worker"])
    with pytest.raises(MisuseError, match="pgkick_maintainer"):
        runtime.reap(lambda: 60_000)
    assert job_row(dsn, job.id)["status"] == "running" and kicker.kicks == []
