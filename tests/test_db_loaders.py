"""The jsonb loader on pgkick's connections: the payload a task gets is what json.loads
would have given, whatever the value, read back from a real server."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg.pq import Format

from pgkick.db import JsonbLoader, connect

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
