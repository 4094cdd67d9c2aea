"""The dashboard over HTTP (Starlette's TestClient, a real PostgreSQL): its pages and
filters, its refusals (unknown ids, read-only, not POST, not same-origin, not this
machine), and that a page leaves no session open."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

import pgkick
from pgkick.cli.bulk import JobSelection
from pgkick.errors import InvalidArgument
from pgkick.kick.kickers import NoKicker
from pgkick.store.inspect import MAX_LIMIT
from pgkick.tasks import recurring
from pgkick.tasks.recurring import Periodic, PeriodicRegistry
from pgkick_dev.ui.app import make_app
from tests.helpers import job_row, sessions_gone
from tests.test_jobs_cli import FIXTURE

LOCAL = "http://127.0.0.1:3002"


class FakeTimeline:
    """The Timeline protocol over a list (what `pgkick dev` records)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = events

    def events(self, since: float | None = None, limit: int = 500) -> list[dict[str, Any]]:
        return [e for e in self._events if since is None or e["at"] >= since][-limit:]


class Kicks:
    def __init__(self) -> None:
        self.queues: list[str] = []

    def kick(self, queue: str, reason: str, *, hop: int = 0) -> None:
        self.queues.append(queue)

    def wake_at(self, queue: str, when: datetime) -> None: ...
    def book_rescue(self, queue: str, when: datetime, name: str) -> None: ...
    def cancel_rescue(self, name: str) -> None: ...


@pytest.fixture
def ids(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute(FIXTURE).fetchall()]


def client(app: Any, address: str = "127.0.0.1") -> TestClient:
    return TestClient(app, base_url=LOCAL, client=(address, 50000), follow_redirects=False)


@pytest.fixture
def ui(dsn: str) -> Iterator[TestClient]:
    with client(make_app(dsn)) as opened:
        yield opened


@pytest.fixture
def acting(dsn: str) -> tuple[TestClient, Kicks]:
    kicks = Kicks()
    return client(make_app(dsn, allow_actions=True, kicker=kicks)), kicks


def listed(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<td class="num"><a href="/jobs/(\d+)">', page)]


def test_overview_shows_queues_limits_and_schedules(
    dsn: str, ids: list[int], ui: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = PeriodicRegistry()
    declared.add(Periodic("nightly", "cron(0 3 * * ? *)", "UTC", "mail", "default"))
    monkeypatch.setattr(recurring, "periodic_registry", declared)
    monkeypatch.setattr("pgkick_dev.ui.pages.periodic_registry", declared)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO pgkick.queue_limits VALUES ('money', 3)")
        conn.execute(
            "INSERT INTO pgkick.queue_limits (queue, rate_limit, rate_period, concurrency, paused)"
            " VALUES ('held', 10, '1 minute', 2, true)"
        )
        conn.execute("INSERT INTO pgkick.periodic_ticks VALUES ('nightly', '2026-01-02 03:00Z')")
    page = ui.get("/").text
    rows = re.findall(r"<tr>\s*<td><a href=\"/jobs\?queue=(\w+)\">.*?</tr>", page, re.S)
    assert rows == ["default", "held", "money"]
    money = page[page.index("/jobs?queue=money") :]
    cells = re.findall(r'<td class="num">(?:<a [^>]*>)?(\d+)', money)[:4]
    assert cells == ["1", "0", "1", "1"]  # ready, later, running, failed
    assert "1 of 3 running" in money
    held = page[page.index("/jobs?queue=held") : page.index("/jobs?queue=money")]
    assert "10 starts per 1 min per rate key; 2 running per group key" in held
    paused = re.findall(r"<td>(?:<strong[^>]*>|<span[^>]*>)(yes|no)<", page)
    assert paused == ["no", "yes", "no"]  # default, held (pgkick pause), money
    now = datetime.now(UTC)
    tomorrow = now.replace(hour=3, minute=0, second=0, microsecond=0)
    tomorrow += timedelta(days=1) if tomorrow <= now else timedelta(0)
    assert "2026-01-02 03:00:00 UTC" in page  # the last tick enqueued
    assert tomorrow.strftime("%Y-%m-%d %H:%M:%S UTC") in page  # the next one
    assert "does not keep a scale-to-zero database awake" in page
    assert 'id="refresh" >' in page  # auto-refresh off unless asked for
    assert 'document.visibilityState === "visible"' in page


def test_jobs_filters_and_paging(ids: list[int], ui: TestClient) -> None:
    done, failed, queued, running, boom = ids
    assert listed(ui.get("/jobs").text) == [boom, running, queued, failed, done]
    assert listed(ui.get("/jobs?status=failed").text) == [boom, failed]
    assert listed(ui.get("/jobs?task=mail&queue=money").text) == [boom]
    assert listed(ui.get("/jobs?unique_key=inv-2").text) == [running]
    assert listed(ui.get("/jobs?group=acct-7&status=queued").text) == [queued]
    assert listed(ui.get("/jobs?status=&task=").text) == [boom, running, queued, failed, done]
    # the filters `pgkick jobs` has beside these: the error's text, the created range (the
    # list ignored them and showed every job); a bad time is refused, not ignored
    assert listed(ui.get("/jobs?error=mailbox").text) == [failed]
    assert listed(ui.get("/jobs?since=1d").text) == [boom, running, queued, failed, done]
    assert listed(ui.get("/jobs?since=2030-01-01T00:00%2B00:00").text) == []
    assert listed(ui.get("/jobs?until=1d").text) == []
    assert 'name="error" id="f-error" value="mailbox"' in ui.get("/jobs?error=mailbox").text
    refused = ui.get("/jobs?since=2026-12-01T09:00")
    assert refused.status_code == 400 and "since: " in refused.text and "offset" in refused.text
    older = re.search(r'id="older" href="([^"]+)"', ui.get("/jobs?error=o&limit=1").text)
    assert older and "error=o" in older[1]  # the next page keeps the filter
    seen, url = [], "/jobs?limit=2"
    while url:
        page = ui.get(url).text
        seen += listed(page)
        older = re.search(r'id="older" href="([^"]+)"', page)
        url = older[1].replace("&amp;", "&") if older else ""
    assert seen == [boom, running, queued, failed, done]


def test_a_job_page_shows_everything_and_bad_ids_are_refused(
    ids: list[int], ui: TestClient
) -> None:
    _, failed, _, running, _ = ids
    page = ui.get(f"/jobs/{failed}").text
    assert '<span class="status failed" id="status">failed</span>' in page
    assert "SMTPError: 550 mailbox unavailable" in page and "5 of 5" in page
    assert "&#34;to&#34;: &#34;b&#34;" in page and "only the last error" in page
    assert 'id="retry"' not in page and "Read-only" in page
    assert "until " in ui.get(f"/jobs/{running}").text  # its lease
    missing = ui.get("/jobs/987654")
    assert missing.status_code == 404 and "job 987654 does not exist" in missing.text
    assert ui.get("/jobs/abc").status_code == 404  # names no page, as any unknown path
    # an id past bigint is a job that cannot exist (404), a bad cursor a 400: neither is the
    # database's "bigint out of range" (it answered 503 "Database unavailable")
    beyond = "99999999999999999999"
    for url, status in ((f"/jobs/{beyond}", 404), (f"/workflows/{beyond}", 404)):
        answer = ui.get(url)
        assert answer.status_code == status and f"job {beyond} does not exist" in answer.text
    answer = ui.get(f"/jobs?after={beyond}")
    assert answer.status_code == 400 and "job id must be at most" in answer.text
    bad = ui.get("/jobs?status=finished")
    assert bad.status_code == 400 and "unknown status" in bad.text
    assert ui.get("/timeline").status_code == 404  # not in dev mode


def test_a_filter_with_a_nul_character_is_a_bad_request(ids: list[int], ui: TestClient) -> None:
    """Catches ?error=%00 answered "503 Database unavailable" (PostgreSQL text cannot hold
    NUL, and psycopg's refusal was taken for a database failure), and the bulk API's same
    selection raising psycopg's DataError: the input is refused, naming the filter."""
    for name in ("error", "task", "unique_key"):
        answer = ui.get(f"/jobs?{name}=a%00b")
        assert answer.status_code == 400 and f"{name}: " in answer.text, answer.text
        assert "NUL" in answer.text
    with pytest.raises(InvalidArgument, match=r"error: .*NUL"):
        JobSelection(error="a\x00b")


def test_a_payload_and_result_are_shown_in_their_own_letters(dsn: str, ui: TestClient) -> None:
    """Catches a payload {"city": "東京"} shown as "\\u6771\\u4eac" (json.dumps' ASCII
    escapes): unreadable, and a find for the name a job was enqueued with found nothing."""
    job = pgkick.enqueue_and_kick(
        {"name": "Zoë", "city": "東京"}, task="t", dsn=dsn, kicker=NoKicker()
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgkick.jobs SET status = 'done', finished_at = now(), result = %s"
            " WHERE id = %s",
            ('{"sent": "Ærø"}', job),
        )
    page = html.unescape(ui.get(f"/jobs/{job}").text)
    payload = page.split('<pre id="payload">')[1].split("</pre>")[0]
    assert '"city": "東京"' in payload and '"name": "Zoë"' in payload, payload
    assert '"sent": "Ærø"' in page.split('<pre id="result">')[1]


def test_actions_are_refused_when_read_only(dsn: str, ids: list[int], ui: TestClient) -> None:
    failed = ids[1]
    answer = ui.post(f"/jobs/{failed}/retry", headers={"origin": LOCAL})
    assert answer.status_code == 403 and "--allow-actions" in answer.text
    assert job_row(dsn, failed)["status"] == "failed"


def test_actions_need_a_post_from_our_own_page(
    dsn: str, ids: list[int], acting: tuple[TestClient, Kicks]
) -> None:
    ui, kicks = acting
    done, failed, queued, running, _ = ids
    assert ui.get(f"/jobs/{failed}/retry").status_code == 405
    for headers in (
        {},
        {"origin": "http://evil.example"},
        {"referer": "http://evil.example/page"},
        {"origin": LOCAL, "sec-fetch-site": "cross-site"},
    ):
        answer = ui.post(f"/jobs/{failed}/retry", headers=headers)
        assert answer.status_code == 403 and "refused" in answer.text, headers
    assert job_row(dsn, failed)["status"] == "failed" and kicks.queues == []
    assert ui.post("/jobs/987654/retry", headers={"origin": LOCAL}).status_code == 404
    wrong = ui.post(f"/jobs/{done}/retry", headers={"origin": LOCAL})
    assert wrong.status_code == 409 and f"job {done} is done" in wrong.text

    answer = ui.post(f"/jobs/{failed}/retry", headers={"referer": f"{LOCAL}/jobs/{failed}"})
    assert answer.status_code == 303 and answer.headers["location"].startswith(f"/jobs/{failed}")
    row = job_row(dsn, failed)
    assert (row["status"], row["max_attempts"]) == ("queued", 6) and kicks.queues == ["default"]
    assert "retried" in ui.get(answer.headers["location"]).text

    assert ui.post(f"/jobs/{queued}/cancel", headers={"origin": LOCAL}).status_code == 303
    assert job_row(dsn, queued)["last_error"] == "cancelled by operator"
    assert ui.post(f"/jobs/{running}/cancel", headers={"origin": LOCAL}).status_code == 303
    assert job_row(dsn, running)["cancel_requested_at"] is not None
    assert ui.post(f"/jobs/{done}/cancel", headers={"origin": LOCAL}).status_code == 409


def test_only_this_machine_unless_a_host_was_given(dsn: str, ids: list[int]) -> None:
    app = make_app(dsn)
    away = client(app, "10.1.2.3").get("/jobs")
    assert away.status_code == 403 and "10.1.2.3" in away.text
    rebound = client(app).get("/jobs", headers={"host": "evil.example:3002"})
    assert rebound.status_code == 403 and "evil.example" in rebound.text
    assert client(app, "::1").get("/jobs").status_code == 200
    served = make_app(dsn, allowed_hosts=None)  # `pgkick ui --host 0.0.0.0`
    assert client(served, "10.1.2.3").get("/jobs").status_code == 200


def test_no_session_stays_open_after_a_page(dsn: str, ids: list[int], ui: TestClient) -> None:
    for url in (
        "/",
        "/jobs",
        "/jobs?task=mail",
        f"/jobs/{ids[0]}",
        "/jobs/987654",
        f"/workflows/{ids[0]}",
    ):
        ui.get(url)
        assert sessions_gone(dsn, "pgkick-ui"), url
    acting = client(make_app(dsn, allow_actions=True, kicker=Kicks()))
    acting.post(f"/jobs/{ids[1]}/retry", headers={"origin": LOCAL})
    assert sessions_gone(dsn, "pgkick-ui")


def test_timeline_and_a_jobs_wake_ups_from_the_local_stack(dsn: str, ids: list[int]) -> None:
    now = time.time()
    events = [
        {"at": now - 30, "kind": "kick", "queue": "money", "function": "worker"},
        {
            "at": now - 29.9,
            "kind": "invoke_start",
            "function": "worker",
            "request_id": "r1",
            "queue": "money",
            "hop": 0,
        },
        {"at": now - 29.0, "kind": "throttle", "function": "worker", "queue": "money"},
        {
            "at": now - 28.8,
            "kind": "invoke_end",
            "function": "worker",
            "request_id": "r1",
            "duration_ms": 1100.0,
        },
        {"at": now - 20, "kind": "schedule_create", "queue": "money", "detail": "pgkick-money-x"},
        {
            "at": now - 10,
            "kind": "invoke_start",
            "function": "worker",
            "request_id": "r2",
            "queue": "money",
            "hop": 1,
        },
        {"at": now - 5, "kind": "drop", "function": "worker", "queue": "other"},
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:  # the queued job: born a minute ago
        conn.execute(
            "UPDATE pgkick.jobs SET created_at = now() - interval '1 minute' WHERE id = %s",
            (ids[2],),
        )
    ui = client(make_app(dsn, timeline=FakeTimeline(events), awake_window=5.0))
    page = ui.get("/timeline").text
    invocations = page[page.index('id="invocations"') : page.index('id="awake"')]
    assert "1100 ms" in invocations and "running" in invocations
    assert invocations.count("<tr><td>") == 2
    awake = page[page.index('id="awake"') : page.index('id="events"')]
    total = re.search(r'<th colspan="2">total</th><th class="num">([\d.]+)', awake)
    assert total and 15.5 < float(total[1]) < 17.0  # 29.9 -> 23.8, then 10 s ago -> now
    assert page.count("<rect ") >= 5 and "drop" in page and "throttle" in page
    wakeups = ui.get(f"/jobs/{ids[2]}").text  # the queued job of queue money
    table = wakeups[wakeups.index('id="wakeups"') :]
    assert "kick" in table and "pgkick-money-x" in table and "drop" not in table


def test_a_finished_jobs_wake_ups_outlive_the_events_after_it(dsn: str, ids: list[int]) -> None:
    """Catches the job page reading the newest 500 events since the job's creation, then
    keeping those before its end: once 500 events followed it (another queue's burst), its
    own kick was gone and the page said "No kick or scheduled wake-up of queue default
    during this job's life", while the stack still kept it."""
    done = ids[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        created, finished = conn.execute(
            "UPDATE pgkick.jobs SET created_at = now() - interval '10 minutes',"
            " finished_at = now() - interval '9 minutes' WHERE id = %s"
            " RETURNING created_at, finished_at",
            (done,),
        ).fetchone()
    events = [{"at": created.timestamp() + 0.1, "kind": "kick", "queue": "default"}] + [
        {"at": finished.timestamp() + 1 + i / 10, "kind": "kick", "queue": "other"}
        for i in range(600)
    ]
    page = client(make_app(dsn, timeline=FakeTimeline(events))).get(f"/jobs/{done}").text
    table = page[page.index('id="wakeups"') :].split("</table>")[0]
    assert table.count("<td>kick</td>") == 1, table[:500]


def test_the_timelines_minutes_are_a_positive_number(dsn: str) -> None:
    """Catches /timeline?minutes=inf answered 500 (an OverflowError while rendering "the last
    inf minutes") and -5, 0 or nan shown as "the last -5 minutes": each a 400 naming it."""
    ui = client(make_app(dsn, timeline=FakeTimeline([])))
    for minutes in ("inf", "-inf", "nan", "-5", "0", "abc"):
        answer = ui.get(f"/timeline?minutes={minutes}")
        assert answer.status_code == 400 and "minutes" in answer.text, minutes
    assert ui.get("/timeline?minutes=0.5").status_code == 200


def test_pgkick_ui_needs_a_database_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pgkick ui` never opens a database nobody named: no --dsn, no DATABASE_URL, no server."""
    from pgkick.cli.main import main

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("served without a database"))
    assert main(["ui"]) == 2
    assert capsys.readouterr().err == "pgkick ui: no database: pass --dsn or set DATABASE_URL\n"


def test_the_cancel_button_a_waiting_job_shows_cancels_it(
    dsn: str, acting: tuple[TestClient, Kicks]
) -> None:
    """Catches the button's action refusing waiting jobs (409 "expected queued|running")
    while the page offers it for them, as `pgkick cancel ID` takes them."""
    ui, _ = acting
    parent = pgkick.enqueue_and_kick({}, task="t", queue="w", dsn=dsn, kicker=NoKicker())
    child = pgkick.enqueue_and_kick(
        {}, task="t", queue="w", dsn=dsn, kicker=NoKicker(), after=[parent]
    )
    page = ui.get(f"/jobs/{child}").text
    assert 'id="status">waiting<' in page and 'id="cancel"' in page
    answer = ui.post(f"/jobs/{child}/cancel", headers={"origin": LOCAL})
    assert answer.status_code == 303, answer.text
    row = job_row(dsn, child)
    assert (row["status"], row["last_error"]) == ("failed", "cancelled by operator")


def test_a_retry_with_no_kicker_configured_is_refused_before_it_writes(
    dsn: str, ids: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches the retry committing, then building the kicker: `pgkick ui --allow-actions`
    with neither PGKICK_KICKER nor PGKICK_WORKER_FUNCTION answered 503 "Database
    unavailable" for a job it had queued again. Refused first, naming the settings, the job
    left failed; a cancel (which kicks only what it releases, and logs a kick it cannot
    make) still cancels."""
    for name in ("PGKICK_KICKER", "PGKICK_WORKER_FUNCTION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pgkick.kick.default._default", None)
    _, failed, queued, _, _ = ids
    ui = client(make_app(dsn, allow_actions=True))  # as `pgkick ui` builds it: no kicker
    answer = ui.post(f"/jobs/{failed}/retry", headers={"origin": LOCAL})
    assert answer.status_code == 500 and "Database unavailable" not in answer.text
    assert "nothing changed" in answer.text and "PGKICK_KICKER" in answer.text
    assert job_row(dsn, failed)["status"] == "failed"
    assert ui.post(f"/jobs/{queued}/cancel", headers={"origin": LOCAL}).status_code == 303
    assert job_row(dsn, queued)["status"] == "failed"


def test_served_beyond_this_machine_only_the_hosts_it_was_started_for_are_answered(
    dsn: str, ids: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `pgkick ui --host` checking no Host header, and an action's Origin compared
    with that header: a page on evil.example rebound to the dashboard's address (Host and
    Origin both evil.example) read job pages and cancelled a job. Now a Host the dashboard
    was not started for is refused, naming --allowed-host; an address typed as such (no
    name to rebind) and the names given are served."""
    _, failed, queued, _, _ = ids
    served = make_app(dsn, allow_actions=True, allowed_hosts=None, kicker=Kicks())
    rebound = TestClient(
        served,
        base_url="http://evil.example:3002",
        client=("10.0.0.7", 50000),
        follow_redirects=False,
    )
    page = rebound.get(f"/jobs/{failed}")
    assert page.status_code == 403 and "--allowed-host" in page.text
    origin = {"origin": "http://evil.example:3002"}
    assert rebound.post(f"/jobs/{queued}/cancel", headers=origin).status_code == 403
    assert job_row(dsn, queued)["status"] == "queued"
    by_address = TestClient(served, base_url="http://10.0.0.5:3002", client=("10.0.0.7", 1))
    assert by_address.get("/jobs").status_code == 200

    apps: list[Any] = []  # `pgkick ui --host 0.0.0.0 --allowed-host dash.example`, as served
    monkeypatch.setattr("uvicorn.run", lambda app, **_: apps.append(app))
    from pgkick.cli.main import main

    argv = ["ui", "--dsn", dsn, "--host", "0.0.0.0", "--allowed-host", "dash.example"]
    assert main([*argv, "--allow-actions"]) == 0
    named = TestClient(
        apps[0],
        base_url="http://dash.example:3002",
        client=("10.0.0.7", 50000),
        follow_redirects=False,
    )
    assert named.get(f"/jobs/{failed}").status_code == 200
    # the Origin must name a host the dashboard serves, whatever the Host header says
    other = {"origin": "http://evil.example:3002"}
    assert named.post(f"/jobs/{queued}/cancel", headers=other).status_code == 403
    own = {"origin": "http://dash.example:3002"}
    assert named.post(f"/jobs/{queued}/cancel", headers=own).status_code == 303
    assert job_row(dsn, queued)["status"] == "failed"
    evil = TestClient(apps[0], base_url="http://evil.example:3002", client=("10.0.0.7", 1))
    assert evil.get("/jobs").status_code == 403


def test_an_action_through_a_tls_proxy_is_taken_from_its_https_page(
    dsn: str, ids: list[int]
) -> None:
    """Catches every Retry and Cancel refused behind a proxy that ends TLS on another
    machine (`--host ... --allowed-host jobs.example`): the browser's Origin is
    https://jobs.example, the dashboard is reached over http, and the Origin was compared
    with http://Host ("refused: the request came from https://jobs.example"). An https
    page of a served host is taken; a plain-http page posting to an https dashboard is
    not (a downgrade), nor is another host's https page."""
    _, failed, queued, _, _ = ids
    served = make_app(
        dsn, allow_actions=True, allowed_hosts=None, host_names=["jobs.example"], kicker=Kicks()
    )
    proxied = TestClient(
        served, base_url="http://jobs.example", client=("10.0.0.7", 1), follow_redirects=False
    )
    other = {"origin": "https://evil.example"}
    assert proxied.post(f"/jobs/{queued}/cancel", headers=other).status_code == 403
    answer = proxied.post(f"/jobs/{queued}/cancel", headers={"origin": "https://jobs.example"})
    assert answer.status_code == 303, answer.text
    assert job_row(dsn, queued)["last_error"] == "cancelled by operator"
    https = TestClient(
        served, base_url="https://jobs.example", client=("10.0.0.7", 1), follow_redirects=False
    )
    downgrade = {"origin": "http://jobs.example"}
    assert https.post(f"/jobs/{failed}/retry", headers=downgrade).status_code == 403
    assert job_row(dsn, failed)["status"] == "failed"


def test_times_are_shown_in_utc_whatever_the_sessions_time_zone(
    dsn: str, ids: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches the pages printing datetimes as the session gives them (in its TimeZone: a
    server set to America/New_York, an RDS parameter group) labelled "UTC", or unlabelled
    on the list: 13:43 UTC was shown as 08:43 UTC. Every time shown is UTC, and says so."""
    failed = ids[1]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgkick.jobs SET created_at = '2026-03-04 13:43:05.123+00',"
            " run_at = '2026-03-04 13:43:06+00', finished_at = '2026-03-04 13:44:00+00'"
            " WHERE id = %s",
            (failed,),
        )
        conn.execute(
            "INSERT INTO pgkick.job_steps (job_id, name, args_hash, attempt, duration_ms,"
            " wake_at, created_at) VALUES (%s, 'nap', '', 1, 0, '2026-03-04 15:00+00',"
            " '2026-03-04 13:43:30+00')",
            (failed,),
        )
        conn.execute("INSERT INTO pgkick.periodic_ticks VALUES ('nightly', '2026-01-02 03:00Z')")
    declared = PeriodicRegistry()
    declared.add(Periodic("nightly", "cron(0 3 * * ? *)", "UTC", "mail", "default"))
    monkeypatch.setattr("pgkick_dev.ui.pages.periodic_registry", declared)
    zoned = psycopg.conninfo.make_conninfo(dsn, options="-c TimeZone=America/New_York")
    ui = client(make_app(zoned))
    page = ui.get(f"/jobs/{failed}").text
    assert re.findall(r"<dt>created</dt><dd>[^<]*</dd>", page) == [
        "<dt>created</dt><dd>2026-03-04 13:43:05.123 UTC</dd>"
    ]
    assert "<dt>finished</dt><dd>2026-03-04 13:44:00.000 UTC</dd>" in page
    steps = page[page.index('id="steps"') :]
    assert "2026-03-04 15:00:00.000 UTC" in steps and "2026-03-04 13:43:30.000 UTC" in steps
    listing = ui.get("/jobs?status=failed").text
    assert "created (UTC)" in listing and "finished (UTC)" in listing
    row = listing[listing.index(f'href="/jobs/{failed}"') :]
    assert "<td>03-04 13:43:05</td>" in row and "<td>03-04 13:44:00</td>" in row
    assert "2026-01-02 03:00:00 UTC" in ui.get("/").text  # the last tick enqueued


def test_a_schema_never_migrated_is_advised_with_its_name(dsn: str) -> None:
    """Catches `pgkick ui --schema b` on a database where b was never migrated advising a
    bare `pgkick migrate`, which makes schema pgkick and leaves the page failing."""
    with client(make_app(dsn, schema="never_made")) as opened:
        page = opened.get("/jobs")
    assert page.status_code == 503
    assert "pgkick migrate --schema never_made" in page.text


def test_only_ascii_digits_name_a_job_or_a_number_in_a_url(dsn: str, ids: list[int]) -> None:
    """Catches /jobs/\uff11 (a full-width digit 1) shown as job 1, and full-width digits in
    ?limit=, ?after= and /timeline?minutes= taken as numbers (Python's int() and float() read
    any Unicode digit): a path that is not ASCII digits names no page (the 404 of any unknown
    path), a parameter that is not is a 400 naming it."""
    ui = client(make_app(dsn, timeline=FakeTimeline([])))
    unknown = ui.get("/nowhere")
    for path in ("/jobs/\uff11", "/workflows/\uff11", "/jobs/abc", "/jobs/+1", "/jobs/1_0"):
        answer = ui.get(path)
        assert (answer.status_code, answer.text) == (404, unknown.text), path
    assert ui.post("/jobs/\uff11/cancel").status_code in (403, 404)  # never job 1's action
    for query, name in (
        ("/jobs?limit=\uff15\uff10", "limit"),
        ("/jobs?limit=5_0", "limit"),
        ("/jobs?after=\uff11\uff10", "job id"),
        ("/timeline?minutes=\uff15", "minutes"),
        ("/timeline?minutes=1_5", "minutes"),
    ):
        answer = ui.get(query)
        assert answer.status_code == 400 and name in answer.text, query
    assert ui.get("/jobs/1").status_code == 200
    assert ui.get("/jobs?limit=50&after=10").status_code == 200
    assert ui.get("/timeline?minutes=0.5").status_code == 200


def test_the_page_size_menu_offers_up_to_the_largest_page_the_url_takes(
    ids: list[int], ui: TestClient
) -> None:
    """Catches the menu offering 25..200 while ?limit= took up to 500 (a page size one could
    type but never pick): one limit, the store's MAX_LIMIT, is the menu's largest and the
    URL's; past it, or below 1, a 400 in the same words as a limit that is no number."""
    menu = re.search(r'<select name="limit">(.*?)</select>', ui.get("/jobs").text, re.S)
    assert menu is not None
    offered = [int(n) for n in re.findall(r"<option[^>]*>(\d+)</option>", menu[1])]
    assert max(offered) == MAX_LIMIT and 50 in offered
    assert ui.get(f"/jobs?limit={MAX_LIMIT}").status_code == 200
    picked = ui.get(f"/jobs?limit={MAX_LIMIT}").text
    assert f"<option selected>{MAX_LIMIT}</option>" in picked
    words = f"limit must be a whole number from 1 to {MAX_LIMIT}"
    for text in (str(MAX_LIMIT + 1), "0", "abc"):
        answer = ui.get(f"/jobs?limit={text}")
        assert answer.status_code == 400 and f"{words}, not &#39;{text}&#39;" in answer.text, text
