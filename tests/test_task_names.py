"""Tasks found or refused (issue #27, defects 2 and 3): PGKICK_TASKS's format, the app's
folder on the command's import path, a misspelt task refused before writing, and an
unknown task retried by the worker (a deploy mid-rollout) with what it loaded named."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgkick
from pgkick import config, validation
from pgkick.kick.kickers import NoKicker
from pgkick.tasks.registry import Registry
from pgkick.worker.loop import Worker, WorkerOptions
from tests.helpers import job_row, seed
from tests.store import JobStore
from tests.test_producer import RecordingKicker, count_jobs

PGKICK = Path(sys.executable).parent / "pgkick"  # the console script, as a user runs it
APP_TASKS = """
import pgkick

@pgkick.task("send_receipt")
def send_receipt(payload):
    pass
"""


@pytest.mark.parametrize(
    "value", ["myapp.tasks myapp", "myapp/tasks.py", "myapp.tasks;billing", "my-app"]
)
def test_pgkick_tasks_that_is_not_a_list_of_modules_is_refused(value: str) -> None:
    """Catches a space-separated value read as one module (`No module named 'myapp.tasks
    myapp'`), and any other shape failing only when imported."""
    with pytest.raises(pgkick.ConfigError, match="comma-separated list of importable modules"):
        config.task_modules({"PGKICK_TASKS": value})
    assert config.task_modules({"PGKICK_TASKS": " myapp.tasks, billing.jobs ,"}) == (
        "myapp.tasks",
        "billing.jobs",
    )


def _pgkick(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "PGKICK_KICKER": "none",
        "PGKICK_DEV_URL": os.environ["PGKICK_DEV_URL"],  # this test's own stack (conftest)
        **env,
    }
    return subprocess.run(
        [str(PGKICK), *args], capture_output=True, text=True, cwd=cwd, env=clean, timeout=120
    )


def test_the_console_script_finds_the_apps_tasks_and_refuses_a_typo(
    dsn: str, tmp_path: Path
) -> None:
    """Catches the console script without the working folder on its path (a 30-line
    traceback ending `No module named 'myapp'`), and a misspelt TASK enqueued anyway."""
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "tasks.py").write_text(APP_TASKS)
    good = _pgkick(tmp_path, "enqueue", "send_receipt", "--dsn", dsn, PGKICK_TASKS="myapp.tasks")
    assert good.returncode == 0, good.stderr
    typo = _pgkick(tmp_path, "enqueue", "send_reciept", "--dsn", dsn, PGKICK_TASKS="myapp.tasks")
    assert typo.returncode == 2
    assert typo.stderr.count("\n") == 1 and "Traceback" not in typo.stderr
    assert "did you mean 'send_receipt'?" in typo.stderr
    assert count_jobs(dsn) == 1

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lost = _pgkick(elsewhere, "enqueue", "send_receipt", "--dsn", dsn, PGKICK_TASKS="myapp.tasks")
    assert lost.returncode == 2 and "Traceback" not in lost.stderr, lost.stderr
    assert lost.stderr.count("\n") == 1
    assert "PGKICK_TASKS names 'myapp.tasks'" in lost.stderr and "PYTHONPATH" in lost.stderr
    # The local kicker's worker processes (the development stand-in for Lambda) import the
    # app's tasks from the same folder, and run the job.
    local = _pgkick(
        tmp_path,
        *("enqueue", "send_receipt", "--dsn", dsn, "--json", "--wait", "60"),
        PGKICK_TASKS="myapp.tasks",
        PGKICK_KICKER="local",
        DATABASE_URL=dsn,
    )
    assert local.returncode == 0, local.stderr[-2000:]
    assert '"status": "done"' in local.stdout, local.stdout + local.stderr[-2000:]
    spaced = _pgkick(tmp_path, "enqueue", "send_receipt", "--dsn", dsn, PGKICK_TASKS="myapp a")
    assert spaced.returncode == 2 and "not spaces" in spaced.stderr
    assert count_jobs(dsn) == 2


def test_a_producer_that_loaded_its_tasks_refuses_a_misspelt_name(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches `enqueue_and_kick(..., task="send_reciept")` returning an id for a job that
    can only fail later."""
    monkeypatch.setattr(validation, "known_task", None)  # undone after this test
    pgkick.load_tasks(["tests.example_shop"])
    with pytest.raises(pgkick.UnknownTask, match="did you mean 'example_send_receipt'"):
        pgkick.enqueue_and_kick({}, task="example_send_reciept", dsn=dsn, kicker=NoKicker())
    with pytest.raises(pgkick.UnknownTask, match=r"jobs\[1\]"):
        pgkick.enqueue_many(
            [{"payload": {}, "task": "noop"}, {"payload": {}, "task": "nop"}],
            dsn=dsn,
            kicker=NoKicker(),
        )
    assert count_jobs(dsn) == 0
    assert pgkick.enqueue_and_kick({}, task="noop", dsn=dsn, kicker=NoKicker()) > 0


def test_a_worker_retries_an_unknown_task_and_says_what_it_loaded(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches an unknown task failed for good at its first attempt (a worker deployed a
    minute behind its producer loses the job), or an error that names neither the
    registry's modules nor PGKICK_TASKS."""
    monkeypatch.setenv("PGKICK_TASKS", "tests.example_shop")
    tasks = Registry()
    tasks.load(["tests.example_shop"])  # registers into pgkick's registry, recorded here
    tasks.task("send_receipt")(lambda payload: None)
    with JobStore.open(dsn) as store:
        (job_id,) = seed(store, 1, task="send_reciept", max_attempts=2)
        for _ in range(2):
            store.execute("UPDATE pgkick.jobs SET run_at = now() - interval '1 s'")
            Worker(store, tasks, RecordingKicker(), WorkerOptions(heartbeat=False)).drain(
                "default", lambda: 600_000
            )
            row = job_row(dsn, job_id)
            if row["status"] == "queued":
                assert row["attempts"] == 1  # retried once, not failed at once
    assert (row["status"], row["attempts"]) == ("failed", 2)
    error = row["last_error"]
    assert error.startswith("unknown task 'send_reciept' (did you mean 'send_receipt'?)")
    assert "tests.example_shop" in error and "PGKICK_TASKS='tests.example_shop'" in error


@pytest.fixture
def app_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on the import path for an app's task modules; pgkick's registry and
    sys.modules are as they were after the test (its modules register into them)."""
    from pgkick.tasks.registry import registry

    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {name: copy.copy(value) for name, value in vars(registry).items()}
    modules = set(sys.modules)
    try:
        yield tmp_path
    finally:
        for name in set(sys.modules) - modules:
            del sys.modules[name]
        vars(registry).update(saved)


def _drain_app_registry(dsn: str) -> None:
    from pgkick.tasks.registry import registry

    with JobStore.open(dsn) as store:
        store.execute("UPDATE pgkick.jobs SET run_at = now() - interval '1 s'")
        Worker(store, registry, RecordingKicker(), WorkerOptions(heartbeat=False)).drain(
            "default", lambda: 600_000
        )


@pytest.mark.parametrize("breaks", ["a wrapper without functools.wraps", "a failing re-import"])
def test_an_unknown_task_never_costs_a_warm_worker_the_tasks_it_has(
    dsn: str, app_folder: Path, monkeypatch: pytest.MonkeyPatch, breaks: str
) -> None:
    """Catches a job of an unknown name (a typo, a newer producer mid-rollout) making the
    worker drop PGKICK_TASKS' tasks before importing the modules again, and keep them
    dropped when that import raised ("already registered" for a task wrapped by a helper
    without functools.wraps, whose __module__ is the helper's): every later job of a task
    still deployed failed "unknown task" in that warm environment."""
    (app_folder / "reload_helper.py").write_text(
        "IMPORTS = []\n"
        "def timed(fn):\n"
        "    def wrapper(payload):\n"
        "        return fn(payload)\n"
        "    return wrapper\n"
    )
    if breaks == "a wrapper without functools.wraps":
        body = "@pgkick.task('reload_receipt')\n@timed\ndef receipt(payload):\n    pass\n"
    else:
        body = "if IMPORTS[1:]:\n    raise RuntimeError('the second import fails')\n"
    (app_folder / "reload_tasks.py").write_text(
        "import pgkick\nfrom reload_helper import IMPORTS, timed\nIMPORTS.append(1)\n"
        + body
        + "\n@pgkick.task('reload_refund')\ndef refund(payload):\n    pass\n"
    )
    monkeypatch.setenv("PGKICK_TASKS", "reload_tasks")
    from pgkick.tasks.registry import registry

    registry.load(["reload_tasks"])
    with JobStore.open(dsn) as store:
        (stray,) = seed(store, 1, task="reload_refnud", max_attempts=1)
    _drain_app_registry(dsn)
    assert job_row(dsn, stray)["status"] == "failed"
    assert "reload_refund" in registry.names()
    with JobStore.open(dsn) as store:
        (job,) = seed(store, 1, task="reload_refund", max_attempts=1)
    _drain_app_registry(dsn)
    row = job_row(dsn, job)
    assert row["status"] == "done", row["last_error"]
