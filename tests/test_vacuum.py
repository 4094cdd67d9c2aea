"""The article's vacuum trap: an open transaction pins dead tuples; pgkick never leaves one open."""

from __future__ import annotations

import re
from datetime import timedelta

import psycopg

from tests.helpers import seed
from tests.store import JobStore

LEASE = timedelta(minutes=5)


def dead_but_not_removable(dsn: str) -> int:
    """Run VACUUM (VERBOSE) jobs and read the count from its INFO report."""
    messages: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: messages.append(diag.message_primary or ""))
        conn.execute("VACUUM (VERBOSE) pgkick.jobs")
    text = "\n".join(messages)
    match = re.search(r"(\d+) are dead but not yet removable", text)
    assert match, text
    return int(match[1])


def drain(dsn: str) -> int:
    done = 0
    with JobStore.open(dsn) as store:
        while jobs := store.claim("default", batch=10, lease=LEASE):
            done += len(store.complete_many(jobs))
    return done


def test_draining_with_pgkick_leaves_nothing_unremovable(dsn: str, store: JobStore) -> None:
    seed(store, 2_000)
    with psycopg.connect(dsn, autocommit=True) as watcher:  # another session, idle, watching
        watcher.execute("SELECT count(*) FROM pgkick.jobs")
        assert drain(dsn) == 2_000
        assert dead_but_not_removable(dsn) == 0


def test_a_claim_left_open_pins_every_dead_tuple_until_it_commits(
    dsn: str, store: JobStore
) -> None:
    """The control: the lock-while-working mistake the article measured (2,000 dead, pinned)."""
    seed(store, 2_001)
    with psycopg.connect(dsn) as holder:  # claims one job and keeps working inside BEGIN
        JobStore(holder).claim("default", batch=1, lease=LEASE)
        assert drain(dsn) == 2_000
        assert dead_but_not_removable(dsn) >= 2_000
        holder.commit()
    assert dead_but_not_removable(dsn) == 0
