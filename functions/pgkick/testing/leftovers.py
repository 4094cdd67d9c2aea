"""A test session's mark on its databases, and the next session dropping a dead one's.

Why: the plugin drops its databases in fixture teardowns, which a killed session
(SIGKILL, a CI timeout's SIGTERM, a lost runner) never reaches. On pgkick-dev's
embedded server that costs nothing lasting (pgkick_dev.session_reaper stops it and
removes its folder), but on a named server (PGKICK_TEST_DATABASE_URL, DATABASE_URL)
the template and the test's copy stayed for good, one pair more per killed session.

How a session tells a dead session's databases from a live one's, across machines,
containers and pid namespaces: the server itself keeps the mark. Each session draws
a number, takes a session-level advisory lock on it (database_session_claim) on a
connection it holds until it ends, and puts the number in the name of every
database it makes (`pgkick_test_db_<number>_<random>`). A process that dies loses
its connection, and the server releases the lock with it. At its start a session
lists the `pgkick_test_*` databases: one named with a number whose lock it can take
belongs to a session that is gone, and is dropped. A name without a number (made
before this change, or by hand) is never touched, nor one whose lock is held.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from pgkick.connections.db import Database
from pgkick.errors import DatabaseUnavailable
from pgkick.store import queries

SPACE = 0x706B7473  # the advisory locks' first key ("pkts"): test sessions, nothing else
MARKED = re.compile(r"pgkick_test_(?:db|template)_([0-9a-f]{8})_[0-9a-f]{12}")
# a database another role owns (42501), one still in use (55006), one gone meanwhile (3D000):
# left for its owner or the next session, as the drop is housekeeping, never the test's
SKIPPED = {"42501", "55006", "3D000"}

_current: str | None = None  # the running session's number, 8 hex digits, while it holds it


def current() -> str | None:
    """The number this process's session marks its databases with (None: no session)."""
    return _current


@contextmanager
def session(server_dsn: str) -> Iterator[list[str]]:
    """Mark this process's databases on `server_dsn` as a live session's until the block
    ends, after dropping those of dead sessions; yields the names it dropped."""
    global _current
    with Database.open(server_dsn, application_name="pgkick-testing-session") as held:
        number = _claim_new(held)
        _current = f"{number:08x}"
        try:
            yield _drop_dead(held, server_dsn, own=_current)
        finally:
            _current = None
            held.one(queries.DATABASE_SESSION_RELEASE, space=SPACE, session=number)


def _claim_new(held: Database) -> int:
    """A number no live session holds, its lock taken on `held` (a collision of two
    sessions' random numbers draws again)."""
    for _ in range(8):
        number = 1 + secrets.randbelow(2**31 - 1)
        if held.one(queries.DATABASE_SESSION_CLAIM, space=SPACE, session=number)[0]:
            return number
    raise DatabaseUnavailable(  # eight draws out of two billion all taken: not chance
        "pgkick.testing could not mark its test session on the server (its advisory lock "
        "was refused eight times): check what holds advisory locks of key space "
        f"{SPACE} there"
    )


def _drop_dead(held: Database, server_dsn: str, *, own: str) -> list[str]:
    """Drop the marked databases whose session's lock is free: the session is gone."""
    by_session: dict[str, list[str]] = {}
    for (name,) in held.rows(queries.DATABASE_TEST_LIST):
        found = MARKED.fullmatch(name)
        if found and found[1] != own:
            by_session.setdefault(found[1], []).append(name)
    dropped: list[str] = []
    for mark, names in sorted(by_session.items()):
        number = int(mark, 16)
        if not held.one(queries.DATABASE_SESSION_CLAIM, space=SPACE, session=number)[0]:
            continue  # its session is alive (or its connection not yet ended): keep
        try:
            for name in sorted(names):  # a copy before its template: "db" < "template"
                if _dropped(server_dsn, name):
                    dropped.append(name)
        finally:
            held.one(queries.DATABASE_SESSION_RELEASE, space=SPACE, session=number)
    return dropped


def _dropped(server_dsn: str, name: str) -> bool:
    from pgkick.testing.databases import drop  # imported here: databases names with current()

    try:
        drop(server_dsn, name)
    except Exception as exc:
        if getattr(exc, "sqlstate", None) not in SKIPPED:
            raise
        return False
    return True
