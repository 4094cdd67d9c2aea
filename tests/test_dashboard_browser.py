"""The dashboard in a real browser: Debian's chromium, driven by Selenium through
chromedriver, against the dashboard served by uvicorn on a real PostgreSQL.

Opens the pages, filters, opens a job, retries a failed job and sees it run (the real
worker loop), cancels a running one, follows a workflow from one of its jobs to its
jobs' states and critical path, reads a job's durable steps, and checks that a page
refreshes only when asked and only while visible. A screenshot of each page is saved
(the folder is printed). Without chromium the tests skip, saying so, unless
PGKICK_REQUIRE_BROWSER=1 (CI): then they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

import pgkick
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.context import JobContext
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from pgkick_dev.ui.app import make_app
from tests.helpers import job_row, seed, sessions_of
from tests.store import JobStore
from tests.test_dashboard import FakeTimeline
from tests.test_jobs_cli import FIXTURE

CHROME_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)
WAIT = 30.0


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        return chromium, driver
    reason = "chromium or chromedriver is missing (apt-get install chromium chromium-driver)"
    if os.environ.get("PGKICK_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, and PGKICK_REQUIRE_BROWSER=1")
    pytest.skip(reason)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = tmp_path / "screenshots"
    folder.mkdir()
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    chromium, driver_path = _browser_paths()
    options = Options()
    options.binary_location = chromium
    for arg in (*CHROME_ARGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


class Counted:
    """ASGI wrapper counting the page requests the browser makes."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.pages: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.pages.append(scope["path"])
        await self.app(scope, receive, send)


def serve(app: Any) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="dashboard")
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(WAIT)


@pytest.fixture
def counted(dsn: str) -> Counted:
    events = [
        {
            "at": time.time() - 40 + i * 3,
            "kind": kind,
            "function": "worker",
            "queue": "default",
            "request_id": f"r{i // 3}",
            "hop": i // 3,
            "duration_ms": 2500.0 if kind == "invoke_end" else None,
        }
        for i, kind in enumerate(["kick", "invoke_start", "invoke_end"] * 4)
    ] + [{"at": time.time() - 8, "kind": "throttle", "queue": "default"}]
    return Counted(
        make_app(
            dsn,
            allow_actions=True,
            kicker=NoKicker(),
            timeline=FakeTimeline(events),
            awake_window=10.0,
        )
    )


@pytest.fixture
def url(counted: Counted) -> Iterator[str]:
    yield from serve(counted)


def tasks() -> Registry:
    registry = Registry()

    @registry.task("mail")
    def mail(payload: Any) -> dict[str, Any]:
        return {"sent_to": payload.get("to")}

    return registry


def status(browser: webdriver.Chrome) -> str:
    return str(browser.find_element(By.ID, "status").text)


def click_and_load(browser: webdriver.Chrome, by: str, value: str) -> None:
    """Click what loads a new page (a link, a form's button) and wait until it has.

    The old page is marked with a window property; a new document has none. (Waiting for the
    old ``<html>`` element to go stale raced the navigation: chromedriver sometimes answered
    "Node with given id does not belong to the document" instead of a stale reference, and
    errors of that kind while the page is being replaced are retried here, not failed on.)
    """
    browser.execute_script("window.__pgkickOldPage = true;")
    browser.find_element(by, value).click()
    WebDriverWait(browser, WAIT, ignored_exceptions=(WebDriverException,)).until(
        lambda b: b.execute_script(
            "return window.__pgkickOldPage === undefined && document.readyState === 'complete'"
        )
    )


def shown(browser: webdriver.Chrome, element_id: str) -> str:
    """The text of an element once the page showing it has loaded (after a form's POST)."""
    found = WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.ID, element_id))
    return str(found[0].text)


def ids_listed(browser: webdriver.Chrome) -> list[int]:
    cells = browser.find_elements(By.CSS_SELECTOR, "#jobs td.num a")
    return [int(cell.text) for cell in cells]


def test_filter_open_retry_and_see_it_run(
    dsn: str, url: str, browser: webdriver.Chrome, shots: Path
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        done, failed, queued, running, boom = [r[0] for r in conn.execute(FIXTURE).fetchall()]
        conn.execute(
            "INSERT INTO pgkick.queue_limits (queue, rate_limit, rate_period, concurrency, paused)"
            " VALUES ('held', 10, '1 minute', 2, true)"
        )
    browser.get(url + "/")
    queues = browser.find_element(By.ID, "queues").text
    assert queues.count("money") == 1
    assert "held 0 0 0 0 - 10 starts per 1 min per rate key; 2 running per group key yes" in queues
    browser.save_screenshot(str(shots / "1-queues.png"))

    browser.get(url + "/jobs")
    assert ids_listed(browser) == [boom, running, queued, failed, done]
    Select(browser.find_element(By.ID, "f-status")).select_by_value("failed")
    browser.find_element(By.ID, "f-queue").send_keys("default")
    click_and_load(browser, By.ID, "apply")
    assert ids_listed(browser) == [failed]
    assert "status=failed" in browser.current_url
    browser.find_element(By.ID, "f-error").send_keys("mailbox")  # the error's text too
    click_and_load(browser, By.ID, "apply")
    assert ids_listed(browser) == [failed] and "error=mailbox" in browser.current_url
    browser.save_screenshot(str(shots / "2-jobs-failed.png"))

    click_and_load(browser, By.LINK_TEXT, str(failed))
    assert status(browser) == "failed"
    assert "SMTPError" in browser.find_element(By.ID, "last-error").text
    browser.save_screenshot(str(shots / "3-job-failed.png"))

    click_and_load(browser, By.ID, "retry")  # a same-origin POST, then the job's page
    assert "retried" in shown(browser, "message")
    assert status(browser) == "queued"
    with JobStore.open(dsn) as store:  # the worker's own loop runs it
        summary = Worker(store, tasks(), NoKicker(), WorkerOptions(max_fanout=0)).drain(
            "default", lambda: 600_000
        )
    assert summary.done == 1
    browser.refresh()
    assert status(browser) == "done"
    assert '"sent_to": "b"' in browser.find_element(By.ID, "result").text
    assert browser.find_element(By.ID, "attempts").text == "6 of 6"
    browser.save_screenshot(str(shots / "4-job-done.png"))
    assert sessions_of(dsn, "pgkick-ui") == 0


def test_cancel_a_running_job(dsn: str, url: str, browser: webdriver.Chrome, shots: Path) -> None:
    registry = Registry()
    started = threading.Event()

    @registry.task("long")
    def long(payload: Any, job: JobContext) -> None:
        started.set()
        job.cancelled.wait(WAIT)  # until the heartbeat reads the operator's cancel

    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1, task="long")
    options = WorkerOptions(batch=1, lease=timedelta(seconds=0.6), max_fanout=0, heartbeat=True)

    def work() -> None:
        with JobStore.open(dsn) as store:
            Worker(store, registry, NoKicker(), options).drain("default", lambda: 600_000)

    worker = threading.Thread(target=work, name="worker")
    worker.start()
    assert started.wait(WAIT)
    browser.get(url + "/jobs?status=running")
    assert ids_listed(browser) == [job_id]
    click_and_load(browser, By.LINK_TEXT, str(job_id))
    assert status(browser) == "running"
    browser.save_screenshot(str(shots / "5-job-running.png"))
    click_and_load(browser, By.ID, "cancel")
    assert "cancelling" in shown(browser, "message")
    worker.join(WAIT)
    assert not worker.is_alive()
    browser.refresh()
    assert status(browser) == "failed"
    assert browser.find_element(By.ID, "last-error").text == "cancelled by operator"
    browser.save_screenshot(str(shots / "6-job-cancelled.png"))
    assert job_row(dsn, job_id)["last_error"] == "cancelled by operator"


def test_a_workflow_and_a_jobs_steps_in_the_browser(
    dsn: str, url: str, browser: webdriver.Chrome, shots: Path
) -> None:
    """A diamond whose one branch failed: from a node's page to the workflow's, each job's
    state, the dependant failed with its parent's reason, the critical path marked; then
    a job of durable steps shows each step's result and its sleep."""
    registry = tasks()

    @registry.task("stepped")
    def stepped(payload: Any, job: JobContext) -> None:
        job.step("fetch", lambda: {"rows": 7})
        job.sleep(3600)

    @registry.task("broken")
    def broken(payload: Any) -> None:
        raise ValueError("no such invoice")

    wf = pgkick.Workflow()
    a = wf.add("mail", {"to": "a"})
    b = wf.add("stepped", {}, after=[a])
    c = wf.add("broken", {}, after=[a], max_attempts=1)
    d = wf.add("mail", {"to": "d"}, after=[b, c])
    run = wf.enqueue(dsn=dsn, kicker=NoKicker())
    with JobStore.open(dsn) as store:
        Worker(store, registry, NoKicker(), WorkerOptions(max_fanout=0)).drain(
            "default", lambda: 600_000
        )

    browser.get(url + f"/jobs/{run[a]}")
    assert status(browser) == "done"
    click_and_load(browser, By.ID, "workflow")
    assert browser.find_element(By.ID, "statuses").text == "4 jobs: 1 done, 2 failed, 1 queued"
    rows = browser.find_elements(By.CSS_SELECTOR, "#workflow-jobs tbody tr")
    shown_rows = {int(r.find_element(By.TAG_NAME, "a").text): r for r in rows}
    assert list(shown_rows) == [run[a], run[b], run[c], run[d]]
    states = {i: r.find_element(By.CSS_SELECTOR, "span.status").text for i, r in shown_rows.items()}
    assert states == {run[a]: "done", run[b]: "queued", run[c]: "failed", run[d]: "failed"}
    assert f"parent job {run[c]} failed" in shown_rows[run[d]].text
    path = [int(x.text) for x in browser.find_elements(By.CSS_SELECTOR, "#critical-path a")]
    assert path[0] == run[a] and path[-1] == run[d]
    marked = {i for i, r in shown_rows.items() if "critical" in (r.get_attribute("class") or "")}
    assert marked == set(path)
    browser.save_screenshot(str(shots / "8-workflow.png"))

    click_and_load(browser, By.LINK_TEXT, str(run[b]))
    assert status(browser) == "queued"  # asleep: re-queued with a wake-up
    steps = browser.find_element(By.ID, "steps").text
    assert "fetch" in steps and '"rows": 7' in steps
    browser.save_screenshot(str(shots / "9-job-steps.png"))


def test_a_finished_workflow_with_a_node_that_never_ran_shows_its_path_by_durations(
    dsn: str, url: str, browser: webdriver.Chrome, shots: Path
) -> None:
    """Review 60 (workflows, F1), in the browser: a node failed by its parent's policy never
    ran, and the page called the finished workflow "not finished" for good."""
    registry = tasks()

    @registry.task("broken")
    def broken(payload: Any) -> None:
        raise ValueError("no such invoice")

    wf = pgkick.Workflow()
    a = wf.add("mail", {"to": "a"})
    c = wf.add("broken", {}, after=[a], max_attempts=1)
    d = wf.add("mail", {"to": "d"}, after=[c])  # failed by c's failure: never claimed
    run = wf.enqueue(dsn=dsn, kicker=NoKicker())
    with JobStore.open(dsn) as store:
        Worker(store, registry, NoKicker(), WorkerOptions(max_fanout=0)).drain(
            "default", lambda: 600_000
        )
    browser.get(url + f"/workflows/{run[a]}")
    assert browser.find_element(By.ID, "statuses").text == "3 jobs: 1 done, 2 failed"
    said = browser.find_element(By.ID, "critical-path").text
    assert "s of runs" in said and "not finished" not in said, said
    path = [int(x.text) for x in browser.find_elements(By.CSS_SELECTOR, "#critical-path a")]
    assert path == [run[a], run[c], run[d]]
    browser.save_screenshot(str(shots / "8b-workflow-finished.png"))


def test_timeline_page(url: str, browser: webdriver.Chrome, shots: Path) -> None:
    browser.get(url + "/timeline")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart rect")) >= 9
    assert "2500 ms" in browser.find_element(By.ID, "invocations").text
    browser.save_screenshot(str(shots / "7-timeline.png"))


def test_refreshes_only_when_asked_and_only_while_visible(
    dsn: str, url: str, counted: Counted, browser: webdriver.Chrome
) -> None:
    browser.get(url + "/jobs")
    time.sleep(6)  # past one refresh period: nothing is asked for
    assert counted.pages == ["/jobs"]
    click_and_load(browser, By.ID, "refresh")  # reloads with ?refresh=1, then every 5 s
    time.sleep(6)
    assert counted.pages.count("/jobs") >= 3, counted.pages
    assert sessions_of(dsn, "pgkick-ui") == 0
    browser.execute_script(  # the tab goes to the background
        "Object.defineProperty(document, 'visibilityState', {value: 'hidden'});"
        "document.dispatchEvent(new Event('visibilitychange'));"
    )
    seen = len(counted.pages)
    time.sleep(6)
    assert len(counted.pages) == seen, counted.pages
