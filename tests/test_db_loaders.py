"""The adapters on pgkick's connections: the payload a task gets is what json.loads would
have given, and a list parameter reaches the server as psycopg's own dumper sends it
(same type, same value), each checked against a plain psycopg connection."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg.adapt import PyFormat
from psycopg.pq import Format
from psycopg.types.numeric import Int4

from pgkick.connections.adapters import IntListDumper, JsonbLoader
from pgkick.connections.db import connect

# Values whose text a careless loader gets wrong: non-ASCII (a Latin-1 or ASCII decode),
# scalars at the top level (an object-only parse), numbers past 64 bits and exponents
# (jsonb keeps numeric text), escapes, nesting.
VALUES: list[Any] = [
    {},
    [],
    None,
    True,
    0,
    "",
    "  spaced out  ",
    "é ✓ 😀 \u2028",
    'quote " backslash \\ tab \t newline \n',
    12345678901234567890123,
    -1.5e-7,
    1e300,
    {"to": "someone@example.com", "n": 1, "tags": ["a", "b"], "deep": {"x": [None, {}]}},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_a_jsonb_value_reads_back_as_json_loads_reads_it(dsn: str, value: Any) -> None:
    """Catches: a loader that decodes the bytes as anything but UTF-8 (seen failing with
    Latin-1), parses only objects, or reads numbers another way than json.loads; compared
    with psycopg's own loader on a plain connection, over the same server text."""
    text = json.dumps(value)
    with connect(dsn) as ours, psycopg.connect(dsn, autocommit=True) as plain:
        query = "SELECT %s::jsonb, %s::jsonb::text"
        got, server_text = ours.execute(query, (text, text)).fetchone() or (None, None)
        expected = plain.execute("SELECT %s::jsonb", (text,)).fetchone()
    assert expected is not None
    assert got == expected[0] == json.loads(server_text)
    assert type(got) is type(expected[0])


def test_pgkick_connections_read_jsonb_with_the_fast_loader(dsn: str) -> None:
    """Catches: connect() no longer installing the loader (every claimed payload then goes
    through json.loads on bytes again: detect_encoding, decode, trailing check)."""
    with connect(dsn) as conn:
        oid = conn.adapters.types["jsonb"].oid
        assert conn.adapters.get_loader(oid, Format.TEXT) is JsonbLoader


# Lists at each edge of psycopg's choice of array type (int2/int4/int8/numeric, by the
# element of largest magnitude, a negative one counting as -n - 1), and lists that must
# take psycopg's own path (empty, NULLs, nested, bools, an int subclass, strings).
LISTS: list[Any] = [
    [1, 2, 3],
    [0],
    [2**15 - 1],
    [2**15],
    [-(2**15)],
    [-(2**15) - 1],
    [5, 2**31 - 1],
    [2**31, 1],
    [-(2**31) - 1],
    [2**63 - 1, -3],
    [2**63],
    [-(2**63) - 1, 0],
    list(range(1000, 1010)),
    [],
    [1, None, 3],
    [[1, 2], [3, 4]],
    [True, False],
    [Int4(7), Int4(8)],
    ["a", "b"],
]


@pytest.mark.parametrize("value", LISTS, ids=range(len(LISTS)))
def test_a_list_parameter_is_sent_as_psycopg_sends_it(dsn: str, value: Any) -> None:
    """Catches: the short way for int lists declaring another array type than psycopg's
    own dumper would (an edge of int2/int4/int8/numeric off by one, a negative bound
    wrong): the server would resolve functions and comparisons differently; or writing
    other text (a value changed), or taking lists it must not (bools as ints, NULLs)."""
    with connect(dsn) as ours, psycopg.connect(dsn, autocommit=True) as plain:
        assert _typed(ours, value) == _typed(plain, value)


def _typed(conn: psycopg.Connection[Any], value: Any) -> Any:
    """The type and text the server sees, or the error it raised (an empty list's type
    is ambiguous on both connections)."""
    try:
        return conn.execute("SELECT pg_typeof(%(v)s)::text, (%(v)s)::text", {"v": value}).fetchone()
    except psycopg.Error as exc:
        return type(exc).__name__


def test_pgkick_connections_send_int_lists_the_short_way(dsn: str) -> None:
    """Catches: connect() no longer installing the list dumper (each completed batch then
    pays psycopg's generic list path again, ~45 us a statement)."""
    with connect(dsn) as conn:
        assert conn.adapters.get_dumper(list, PyFormat.AUTO) is IntListDumper


def test_own_loaders_leave_a_connection_with_psycopgs_loaders_alone(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches own_loaders comparing with the Python TimestamptzLoader: with psycopg's C
    loader installed (psycopg[binary]) every cursor of every connection was taken for an
    app's and its loader registered again, a copy of the adapters map per statement."""
    from psycopg.adapt import AdaptersMap

    from pgkick.connections.adapters import own_loaders

    registered: list[int] = []
    original = AdaptersMap.register_loader

    def spy(self: AdaptersMap, oid: Any, loader: Any) -> None:
        registered.append(oid)
        original(self, oid, loader)

    with psycopg.connect(dsn) as conn:
        monkeypatch.setattr(AdaptersMap, "register_loader", spy)
        cursor = conn.cursor()
        own_loaders(cursor)
    assert registered == []  # psycopg's own loaders: nothing replaced, nothing copied
