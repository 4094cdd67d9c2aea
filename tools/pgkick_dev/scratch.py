"""Which database `pgkick bench` and `pgkick demo` may use: their own, never an app's.

Why: the bench empties the jobs table between items and the demo leaves its jobs
behind and closes idle sessions, as a suspending compute would. Pointed at an
app's database (an exported DATABASE_URL was enough) the bench emptied a real
queue. So they never read DATABASE_URL (without `--dsn` they start an embedded
server), and a database named with `--dsn` must be theirs: one with no jobs in
its jobs table (or no jobs table) and no peer queue's tables, or one they marked
as theirs on an earlier run. Anything else is refused before any write; an
accepted one is migrated and marked.

Also here: the server pgkick.testing's pytest plugin starts for an app's test
session when no DATABASE_URL is set (entry point `pgkick.test_servers`), in a
temporary folder of its own, with durability traded for speed, and stopped with its
folder removed by pgkick_dev.session_reaper if the session is killed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pgkick.errors import PgkickError
from pgkick.store import migrations as schema
from pgkick.store.migrations import MigrationStore
from pgkick_dev import queries as dev_queries


class NotScratch(PgkickError, ValueError):
    """The database holds jobs or queues that bench and demo did not create."""


def claim(dsn: str, tool: str) -> None:
    """Refuse a database that holds someone else's jobs; otherwise migrate and mark it."""
    with MigrationStore.open(dsn, application_name=f"pgkick-{tool}") as store:
        state = store.dicts(dev_queries.DATABASE_SCRATCH_STATE)[0]
        if not state["ours"]:
            has_jobs = state["has_jobs_table"] and store.one(dev_queries.JOB_TABLE_ANY_ROW)[0]
            if has_jobs or state["has_peer_tables"]:
                what = "jobs" if has_jobs else "a peer queue's tables (pgqueuer, procrastinate)"
                raise NotScratch(
                    f"refusing the database --dsn names: it holds {what} that pgkick {tool} did not"
                    f" create, and pgkick {tool} may empty it; point --dsn at a database of its"
                    " own (e.g. `createdb pgkick_scratch`), or leave --dsn out for an embedded"
                    " server"
                )
        schema.migrate(store)
        store.execute(dev_queries.JOB_TABLE_MARK_SCRATCH)


# Test-only durability shortcuts: nothing in a test database must survive a power cut.
TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@contextlib.contextmanager
def session_server() -> Iterator[str]:
    """The embedded server for one test session: started in a temporary folder, stopped
    and removed after it; yields its DSN (a superuser, allowed to CREATE DATABASE)."""
    from pgkick_dev.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="pgkick-pytest-"))
    root.chmod(0o755)  # reachable by the unprivileged user the server runs as, under root
    server = EmbeddedPostgres(root / "data", settings=TEST_SETTINGS)
    # a killed session (SIGTERM, SIGKILL) never reaches the `finally`: this watcher, in a
    # session of its own, stops the server and removes the folder when the session is gone
    reaper = subprocess.Popen(
        [sys.executable, "-m", "pgkick_dev.session_reaper", str(os.getpid()), str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield server.start()
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
        reaper.terminate()
        reaper.wait()
