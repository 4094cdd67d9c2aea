"""`pgkick jobs`, `pgkick job ID` and `pgkick enqueue --wait` on a failing job: what an
operator reads, its paging, its one-line errors, and its plans at a million jobs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import psycopg
import pytest

from pgkick.cli.main import main
from pgkick.store import inspect, queries
from pgkick.store.inspect import JobFilter, JobReader

# Jobs in every state, with the columns the filters read (status, task, queue, key, group).
FIXTURE = """
INSERT INTO pgkick.jobs (task, queue, payload, status, attempts, max_attempts, unique_key,
                         group_key, locked_until, claimed_at, finished_at, last_error, result)
VALUES
  ('mail', 'default', '{"to": "a"}', 'done', 1, 5, NULL, NULL, NULL, now(), now(), NULL,
   '{"sent": 1}'),
  ('mail', 'default', '{"to": "b"}', 'failed', 5, 5, NULL, NULL, NULL, now(), now(),
   'SMTPError: 550 mailbox unavailable', NULL),
  ('bill', 'money', '{"n": 1}', 'queued', 0, 5, 'inv-1', 'acct-7', NULL, NULL, NULL, NULL,
   NULL),
  ('bill', 'money', '{"n": 2}', 'running', 1, 3, 'inv-2', 'acct-7',
   now() + interval '5 minutes', now(), NULL, NULL, NULL),
  ('mail', 'money', '{"to": "c"}', 'failed', 1, 1, NULL, NULL, NULL, now(), now(), 'boom', NULL)
RETURNING id
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    out = json.loads(captured.out) if captured.out.strip().startswith("{") else captured.out
    return code, out, captured.err


@pytest.fixture(autouse=True)
def no_kicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGKICK_KICKER", "none")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr("pgkick.kick.default._default", None)


@pytest.fixture
def ids(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute(FIXTURE).fetchall()]


def listed(capsys: pytest.CaptureFixture[str], dsn: str, *argv: str) -> list[int]:
    code, out, err = run(capsys, "jobs", "--dsn", dsn, "--json", *argv)
    assert code == 0, err
    return [job["id"] for job in out["jobs"]]


def test_jobs_filters_newest_first(
    dsn: str, ids: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    done, failed, queued, running, boom = ids
    assert listed(capsys, dsn) == [boom, running, queued, failed, done]
    assert listed(capsys, dsn, "--status", "failed") == [boom, failed]
    assert listed(capsys, dsn, "--status", "running") == [running]
    assert listed(capsys, dsn, "--status", "queued") == [queued]
    assert listed(capsys, dsn, "--task", "mail") == [boom, failed, done]
    assert listed(capsys, dsn, "--queue", "money") == [boom, running, queued]
    assert listed(capsys, dsn, "--queue", "money", "--task", "bill") == [running, queued]
    assert listed(capsys, dsn, "--unique-key", "inv-1") == [queued]
    assert listed(capsys, dsn, "--group", "acct-7") == [running, queued]
    assert listed(capsys, dsn, "--task", "nothing") == []


def test_jobs_table_and_paging_with_the_printed_cursor(
    dsn: str, ids: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[int] = []
    argv = ["jobs", "--dsn", dsn, "--limit", "2"]
    for _ in range(5):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].split() == [
            "id",
            "status",
            "task",
            "queue",
            "attempts",
            "created",
            "last",
            "error",
        ]
        seen += [int(line.split()[0]) for line in lines[1:] if line[0].isdigit()]
        if not lines[-1].startswith("next: --after "):
            break
        argv = ["jobs", "--dsn", dsn, "--limit", "2", *lines[-1].removeprefix("next: ").split()]
    assert seen == sorted(ids, reverse=True)  # every job once, newest first, over three pages
    table = run(capsys, "jobs", "--dsn", dsn)[1]
    assert re.search(r"\d\d  SMTPError: 550 mailbox unavailable\n", table)  # its own column


def test_a_bounded_page_hands_over_to_the_next_window(
    dsn: str, ids: list[int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A filter without an index of its own looks at SCAN_WINDOW ids a page: the pages
    still find every match, in order, by following next_after."""
    monkeypatch.setattr(inspect, "SCAN_WINDOW", 2)
    done, failed, _, _, boom = ids
    pages = []
    after: list[str] = []
    while True:
        _, out, _ = run(capsys, "jobs", "--dsn", dsn, "--json", "--task", "mail", *after)
        pages.append([job["id"] for job in out["jobs"]])
        if out["next_after"] is None:
            break
        after = ["--after", str(out["next_after"])]
    assert pages == [[boom], [failed], [done]]  # one window of 2 ids each, none skipped


def test_a_failed_page_with_another_filter_looks_at_a_window_too(
    dsn: str, ids: list[int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--status failed` alone reads its own index, which holds only matching rows. With
    another filter (--task, --error: the usual search) that index also returns failed jobs
    that do not match, every failed job when few match: such a page is bounded by the
    window as any other filter's (it read all 48,333 failed jobs of 300,000 in a review)."""
    monkeypatch.setattr(inspect, "SCAN_WINDOW", 2)
    _, failed, _, _, boom = ids
    pages = []
    after: list[str] = []
    while True:
        argv = ["--status", "failed", "--task", "mail", *after]
        _, out, _ = run(capsys, "jobs", "--dsn", dsn, "--json", *argv)
        pages.append([job["id"] for job in out["jobs"]])
        if out["next_after"] is None:
            break
        after = ["--after", str(out["next_after"])]
    assert pages == [[boom], [failed], []]  # windows of 2 ids: ids 4-5, 2-3, then 1
    assert listed(capsys, dsn, "--status", "failed") == [boom, failed]  # its index: no window


def test_job_shows_payload_attempts_error_result_times_and_lease(
    dsn: str, ids: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    done, failed, _, running, _ = ids
    code, out, _ = run(capsys, "job", str(failed), "--dsn", dsn)
    assert code == 0
    assert f"job {failed}: failed" in out and "attempts: 5/5" in out
    assert 'payload: {"to": "b"}' in out and "result: -" in out
    assert "SMTPError: 550 mailbox unavailable" in out
    assert "only the last error is stored" in out
    for label in ("created: 2", "run_at: 2", "started: 2", "finished: 2", "lease: none"):
        assert label in out
    out = run(capsys, "job", str(running), "--dsn", dsn)[1]
    assert "lease: until 2" in out and "finished: -" in out and "group: acct-7" in out
    code, out, _ = run(capsys, "job", str(done), "--dsn", dsn, "--json")
    assert out["result"] == {"sent": 1} and out["errors"] == [] and out["payload"] == {"to": "a"}


def test_job_shows_a_payload_in_its_own_letters(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `payload: {"city": "\\u6771\\u4eac"}`: the text as enqueued, as its steps'
    results already were (the database's own JSON text)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        (job,) = conn.execute(
            "INSERT INTO pgkick.jobs (task, payload) VALUES ('t', %s) RETURNING id",
            ('{"city": "東京", "name": "Zoë"}',),
        ).fetchone()
    code, out, _ = run(capsys, "job", str(job), "--dsn", dsn)
    assert code == 0 and 'payload: {"city": "東京", "name": "Zoë"}' in out, out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["jobs", "--status", "finished"],
            "unknown status 'finished': use one of waiting, queued, running, done, failed",
        ),
        (["jobs", "--after", "ten"], "job id must be a whole number, not 'ten'"),
        (["jobs", "--limit", "0"], "limit must be between 1 and 500, not 0"),
        (["job", "abc"], "job id must be a whole number, not 'abc'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, "--dsn", dsn)
    assert code == 2 and out == ""
    assert err == f"pgkick {argv[0]}: {message}\n"


BEYOND_BIGINT = "99999999999999999999"


@pytest.mark.parametrize(
    "argv",
    [
        ["job", BEYOND_BIGINT],
        ["workflow", BEYOND_BIGINT],
        ["jobs", "--after", BEYOND_BIGINT],
        ["retry", BEYOND_BIGINT],
        ["cancel", "3", BEYOND_BIGINT],
        ["retry", "0"],
    ],
)
def test_an_id_beyond_bigint_is_the_id_checks_one_line_and_exit_2(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Catches an id past bigint (or below 1) reaching PostgreSQL: the command printed the
    server's "bigint out of range" (retry and cancel took any int), not the id check."""
    try:
        code, _, err = run(capsys, *argv, "--dsn", dsn)
    except SystemExit as exited:  # retry and cancel: the parser's refusal, one line as well
        code, err = int(str(exited.code)), capsys.readouterr().err
    assert code == 2 and "out of range" not in err and err.count("\n") == 1, err
    assert err.startswith(f"pgkick {argv[0]}: ") and "job id must be" in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["job", "987654"], "job 987654 does not exist: list jobs with `pgkick jobs`"),
        (["workflow", "987654"], "job 987654 does not exist: list jobs with `pgkick jobs`"),
        (["retry", "987654"], "nothing changed: job 987654 does not exist (expected failed)"),
        (["cancel", "987654"], "nothing changed: job 987654 does not exist (expected waiting"),
    ],
)
def test_a_named_job_that_does_not_exist_is_exit_1_for_every_command(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Catches `pgkick job N` of a missing job exiting 2 (the input's code) where `retry N`
    and `cancel N` exit 1 (refused as it stands): a script testing one code for "no such
    job" got the other from the next command."""
    code, out, err = run(capsys, *argv, "--dsn", dsn)
    assert code == 1 and out == ""
    assert err.startswith(f"pgkick {argv[0]}: {message}") and err.count("\n") == 1


def test_jobs_refuses_the_created_range_a_bulk_action_refuses(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches the listing and the bulk actions checking their shared filters apart: a
    --since not before --until is refused by both, in one line (JobFilter's one check)."""
    for command in ("jobs", "retry"):
        code, out, err = run(capsys, command, "--since", "1d", "--until", "2d", "--dsn", dsn)
        assert code == 2 and out == ""
        assert err.startswith(f"pgkick {command}: since ") and " is not before until " in err
        assert err.count("\n") == 1


@pytest.mark.parametrize("option", ["--task", "--queue", "--error", "--group", "--unique-key"])
def test_jobs_refuses_an_empty_filter_as_the_bulk_actions_do(
    dsn: str, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    """Catches `pgkick jobs --task ''` listing every job as if no filter was given, while a
    bulk action refused the same empty filter (inspect.md: the filters refuse what a bulk
    action's refuse), in words naming the option, not Python's None (a review of the CLI, F7);
    retry's form from before (--task alone) is refused the same way, not as 'name job ids'."""
    for argv in (["jobs"], ["retry", "--status", "failed"], ["retry"], ["purge"]):
        code, out, err = run(capsys, *argv, option, "", "--dsn", dsn)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert f"{option} is empty" in err and "None" not in err, (argv, err)


def _enqueue_on_the_local_stack(dsn: str, task: str, payload: str) -> tuple[int, str]:
    """`pgkick enqueue TASK --payload PAYLOAD` as a developer runs it (PGKICK_KICKER=local,
    pgkick-dev's tasks): its exit status and its last line on stderr."""
    env = {
        **os.environ,
        "PGKICK_KICKER": "local",
        "PGKICK_TASKS": "pgkick_dev.tasks",
        "DATABASE_URL": dsn,
    }
    done = subprocess.run(
        [sys.executable, "-m", "pgkick.cli.main", "enqueue", task, "--payload", payload],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    return done.returncode, lines[-1] if lines else done.stdout


def test_enqueue_wait_fails_with_the_jobs_error(dsn: str) -> None:
    """`pgkick enqueue` of a job the local worker fails: the command says why and exits 1,
    where it printed `status: failed` and exited 0."""
    code, last = _enqueue_on_the_local_stack(dsn, "fail", '{"reason": "card declined"}')
    assert code == 1, last
    assert last.startswith("pgkick enqueue: job ") and "(after 1 of 5 attempts; see" in last
    assert "PermanentError: card declined" in last and "see `pgkick job " in last


def test_enqueue_wait_says_at_once_that_a_run_failed_and_is_retried(dsn: str) -> None:
    """`pgkick enqueue` of a job whose first run raises (retried with backoff, as a task
    name the worker does not know is): the command says so as soon as the retry is booked,
    with the error, and exits 1, where it waited its whole 60 s and printed `status: queued`
    with exit 0."""
    code, last = _enqueue_on_the_local_stack(dsn, "flaky", '{"fail_times": 3}')
    assert code == 1, last
    assert re.match(
        r"pgkick enqueue: job \d+ failed attempt 1 of 5, retried at \d\d:\d\d:\d\d UTC: ", last
    )
    assert "flaky: failing attempt 1 on purpose" in last and "see `pgkick job " in last, last


MILLION = """
INSERT INTO pgkick.jobs (task, queue, payload, status, attempts, unique_key, group_key,
                         locked_until, finished_at, last_error)
SELECT 'task_' || (g % 20), 'q' || (g % 5), '{}',
       CASE WHEN g % 1000 = 0 THEN 'failed' WHEN g % 997 = 0 THEN 'queued'
            WHEN g % 9973 = 0 THEN 'running' ELSE 'done' END,
       1,
       CASE WHEN g % 11 = 0 THEN 'k' || g END,
       CASE WHEN g % 7 = 0 THEN 'grp' || (g % 50) END,
       CASE WHEN g % 1000 <> 0 AND g % 997 <> 0 AND g % 9973 = 0 THEN now() + interval '1 hour' END,
       CASE WHEN g % 1000 = 0 OR (g % 997 <> 0 AND g % 9973 <> 0) THEN now() END,
       CASE WHEN g % 1000 = 0 THEN 'boom' END
FROM generate_series(1, 1000000) AS g
"""
# The pages an operator asks for, at the top and deep in the table.
FILTERS = [
    JobFilter(),
    JobFilter(status="failed"),
    JobFilter(status="running"),
    JobFilter(status="queued"),
    JobFilter(status="done"),
    JobFilter(task="task_3"),
    JobFilter(queue="q1", status="failed"),
    JobFilter(unique_key="k990000"),
    JobFilter(group="grp7"),
    JobFilter(task="no such task"),  # nothing matches: the worst case of a scan
]


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in nodes(child))]


def test_pages_read_an_index_and_a_bounded_number_of_rows_at_a_million_jobs(dsn: str) -> None:
    """The page query at 1,000,000 jobs: no Seq Scan on jobs, an index scan, and at most
    SCAN_WINDOW + the page's rows looked at, for every filter, first page and deep."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(MILLION)
        conn.execute("ANALYZE pgkick.jobs")
    report = []
    with JobReader.open(dsn) as reader:
        for filters in FILTERS:
            for after in (None, 400_000):
                params = reader.page_params(filters, after=after, limit=50)
                assert params is not None
                params.pop("_low")
                started = time.perf_counter()
                explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.JOB_LIST_PAGE
                plan = reader.rows(explain, **params)[0][0][0]
                elapsed = (time.perf_counter() - started) * 1000
                scans = [n for n in nodes(plan["Plan"]) if n.get("Relation Name") == "jobs"]
                kinds = {n["Node Type"] for n in scans}
                looked = sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans)
                report.append(
                    f"{filters.as_query() or 'no filter'} after={after}: "
                    f"{sorted(kinds)} {[n.get('Index Name') for n in scans]} "
                    f"looked at {looked} rows, {plan['Execution Time']:.1f} ms "
                    f"(round trip {elapsed:.1f} ms)"
                )
                assert "Seq Scan" not in kinds and kinds & {
                    "Index Scan",
                    "Index Only Scan",
                    "Bitmap Heap Scan",
                }, report[-1]
                assert looked <= inspect.SCAN_WINDOW + 51, report[-1]
        plan = reader.rows("EXPLAIN (FORMAT JSON) " + queries.QUEUE_OVERVIEW)[0][0][0]
        kinds = {n["Node Type"] for n in nodes(plan["Plan"]) if n.get("Relation Name") == "jobs"}
        report.append(f"queue_overview: {sorted(kinds)}")
        assert "Seq Scan" not in kinds, report[-1]
    print("\n".join(report))
