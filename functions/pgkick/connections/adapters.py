"""The type adapters every pgkick connection installs (connect() registers them).

Why our own: psycopg's generic paths cost the worker measurable CPU a job on the two
kinds of values it handles most, the claimed payloads (jsonb) and the id and attempt
arrays of each completed batch; these give the same values and the same text, faster.
"""

from __future__ import annotations

from json import JSONDecoder
from typing import Any

import psycopg
from psycopg.abc import AdaptContext, Buffer, DumperKey
from psycopg.adapt import Loader, PyFormat
from psycopg.postgres import types as pg_types
from psycopg.pq import Format
from psycopg.types.array import BaseListDumper, ListDumper
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.json import JsonbLoader as PsycopgJsonbLoader
from psycopg.types.numeric import Int2, Int4, Int8, IntNumeric

_raw_decode = JSONDecoder().raw_decode


class JsonbLoader(Loader):
    """jsonb as json.loads reads it, in about a third of the time (every claimed payload).

    Why it can skip what json.loads does: the server writes jsonb in its canonical
    text, one value with no whitespace around it and valid UTF-8, so there is no
    encoding to detect and no trailing text to refuse. Installed by connect() only."""

    def load(self, data: Buffer) -> Any:
        try:
            return _raw_decode(str(data, "utf-8"))[0]
        except RecursionError:  # valid jsonb, written by SQL or another producer
            return UnreadableJson(len(data))


class UnreadableJson(str):
    """A jsonb value nested deeper than Python's JSON decoder reads (about 1,000 levels;
    PostgreSQL takes more, and pgkick's own enqueue refuses it). Why a value, not an
    error: the loader reads a whole claim's payloads at once, and its RecursionError
    ended the drain with every job of the claim left running, again at each claim. The
    worker fails the job permanently (pgkick.worker.task_run.unreadable); a page or
    `pgkick job` shows this text in its place."""

    def __new__(cls, size: int) -> UnreadableJson:
        return super().__new__(
            cls, f"(jsonb of {size} bytes, nested deeper than Python's JSON decoder reads)"
        )


_TIMESTAMPTZ = pg_types["timestamptz"].oid
# psycopg's own timestamptz loader: its C one where psycopg[binary] or [c] is installed
# (compared with the Python TimestamptzLoader, every cursor of every connection would be
# taken for an app's and given the slower Python loader, a map copy a statement)
_DEFAULT_TIMESTAMPTZ: type[Any] = psycopg.adapters.get_loader(_TIMESTAMPTZ, Format.TEXT) or (
    TimestamptzLoader
)
_JSONB = pg_types["jsonb"].oid


def own_loaders(cursor: AdaptContext) -> None:
    """Give a cursor on the app's connection pgkick's reading of timestamptz and jsonb back,
    where the app replaced it. Why: Django's psycopg backend loads timestamptz naive with
    USE_TZ=False (and jsonb as text, for its JSONField); pgkick's statements on Django's
    connection read the jobs' due times naive, and the kick after the commit failed
    comparing them with an aware now: every job committed unkicked (a review, 2026-12-05).
    A lookup only where the connection keeps psycopg's loaders (pgkick's own connections)."""
    adapters = cursor.adapters
    if adapters.get_loader(_TIMESTAMPTZ, Format.TEXT) is not _DEFAULT_TIMESTAMPTZ:
        adapters.register_loader(_TIMESTAMPTZ, _DEFAULT_TIMESTAMPTZ)
    if adapters.get_loader(_JSONB, Format.TEXT) not in (JsonbLoader, PsycopgJsonbLoader):
        adapters.register_loader(_JSONB, JsonbLoader)


class _IntArrayDumper(ListDumper):
    """A list of plain ints as an array literal of one type (its oid set by the caller)."""

    def dump(self, obj: list[int]) -> Buffer:
        return ("{" + ",".join(map(str, obj)) + "}").encode()


def _int_array_dumper(type_name: str) -> _IntArrayDumper:
    dumper = _IntArrayDumper(list)
    dumper.oid = pg_types[type_name].array_oid
    return dumper


# The array types psycopg picks for a list of ints, keyed by the element's wrapper type
_INT_ARRAYS: dict[type, _IntArrayDumper] = {
    wrapper: _int_array_dumper(name)
    for wrapper, name in ((Int2, "int2"), (Int4, "int4"), (Int8, "int8"), (IntNumeric, "numeric"))
}
_JUST_INT = {int}


def _int_array_type(obj: list[Any]) -> type | None:
    """The element type psycopg's own ListDumper would declare for `obj` when every element
    is a plain int (its rule: the element of largest magnitude, by int2/int4/int8 range),
    else None."""
    if set(map(type, obj)) != _JUST_INT:  # (an empty list too)
        return None
    high, low = max(obj), min(obj)
    largest = high if low >= 0 else max(high, -low - 1)
    if largest < 2**15:
        return Int2
    if largest < 2**31:
        return Int4
    return Int8 if largest < 2**63 else IntNumeric


class IntListDumper(ListDumper):
    """psycopg's list dumper, with a short way for a flat list of plain ints.

    Why: the worker sends two (ids, attempts) with every batch it completes, and psycopg's
    generic path (a representative element, its dumper looked up and upgraded, a regexp
    per element) doubled the cost of job_complete_many's parameters (32.8 vs 16.1 us).
    Same array type, same text; any other list takes psycopg's path. By connect() only."""

    def get_key(self, obj: list[Any], format: PyFormat) -> DumperKey:
        kind = None if self.oid else _int_array_type(obj)
        return super().get_key(obj, format) if kind is None else (list, kind)

    def upgrade(self, obj: list[Any], format: PyFormat) -> BaseListDumper:
        kind = None if self.oid else _int_array_type(obj)
        return super().upgrade(obj, format) if kind is None else _INT_ARRAYS[kind]
