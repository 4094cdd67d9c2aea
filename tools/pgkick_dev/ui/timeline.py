"""The local stack's timeline, as the dashboard reads and draws it.

Why a Protocol of our own: `pgkick dev` (pgkick_dev.devserver) owns the object that
records kicks, invocations and the scheduler's ticks; the dashboard only needs its
`events()` and must not import the stack. Anything with that method will do (the
tests pass a list in a small class).

Why the awake lane is measured or estimated: the dashboard reads no database for it
(that would be a poll). On the embedded PostgreSQL it started, `pgkick dev` runs the
scale-to-zero activity monitor (pgkick_dev.awake.monitor, an `AwakeMeasure`), whose
own session is harmless there; the lane then shows its measured spans. On a named
database a monitor's session would keep a real serverless compute awake, so the lane
is an estimate: awake while a worker runs and for the suspend `window` after its last
invocation ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

KINDS = (
    "kick",
    "invoke_start",
    "invoke_end",
    "throttle",
    "retry",
    "drop",
    "duplicate",
    "schedule_create",
    "schedule_fire",
    "schedule_delete",
    "freeze",
    "thaw",
)
# The marks drawn on the events lane; invocations are bars of their own.
MARKS = {
    "kick": "#2563eb",
    "throttle": "#d97706",
    "retry": "#ea580c",
    "drop": "#dc2626",
    "duplicate": "#7c3aed",
    "schedule_create": "#0891b2",
    "schedule_fire": "#0e7490",
    "schedule_delete": "#64748b",
    "freeze": "#94a3b8",
    "thaw": "#16a34a",
}


class Timeline(Protocol):
    """What `pgkick dev` records: events, oldest first, each a dict with `at` (epoch
    seconds) and `kind` (KINDS), and optionally function, request_id, queue, hop,
    duration_ms, detail."""

    def events(self, since: float | None = None, limit: int = 500) -> list[dict[str, Any]]: ...


class AwakeMeasure(Protocol):
    """The activity monitor's answers, as the dashboard reads them (AwakeMonitor)."""

    def awake_spans(self) -> list[tuple[float, float]]: ...  # (start, end), epoch seconds

    def kept_awake_by(self) -> dict[str, float]: ...  # application -> awake seconds


def clipped(spans: list[tuple[float, float]], since: float) -> list[tuple[float, float]]:
    """The spans' parts after `since` (the page's time range)."""
    return [(max(a, since), b) for a, b in spans if b > since]


@dataclass(frozen=True, slots=True)
class Invocation:
    function: str
    request_id: str
    queue: str | None
    hop: int | None
    start: float
    end: float | None  # None: still running
    duration_ms: float | None


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    width: float
    y: float
    label: str
    colour: str


def invocations(events: list[dict[str, Any]]) -> list[Invocation]:
    """Each invocation from its start and end events (paired by request id)."""
    started: dict[str, dict[str, Any]] = {}
    found: list[Invocation] = []
    for event in events:
        key = str(event.get("request_id") or "")
        if event["kind"] == "invoke_start":
            started[key] = event
        elif event["kind"] == "invoke_end":
            start = started.pop(key, None)
            at = float(start["at"]) if start else float(event["at"]) - _seconds(event)
            found.append(_invocation(start or event, at, float(event["at"]), event))
    found += [_invocation(e, float(e["at"]), None, e) for e in started.values()]
    return sorted(found, key=lambda i: i.start)


def _seconds(event: dict[str, Any]) -> float:
    return float(event.get("duration_ms") or 0) / 1000


def _invocation(
    first: dict[str, Any], start: float, end: float | None, last: dict[str, Any]
) -> Invocation:
    duration = last.get("duration_ms")
    if duration is None and end is not None:
        duration = (end - start) * 1000
    return Invocation(
        function=str(first.get("function") or "worker"),
        request_id=str(first.get("request_id") or ""),
        queue=first.get("queue"),
        hop=first.get("hop"),
        start=start,
        end=end,
        duration_ms=None if duration is None else float(duration),
    )


def awake_spans(runs: list[Invocation], window: float, now: float) -> list[tuple[float, float]]:
    """When the database is awake: from each invocation's start until `window` after its
    end (a running one: until now), overlapping spans merged."""
    spans = sorted(
        (r.start, min(now, (r.end if r.end is not None else now) + window)) for r in runs
    )
    merged: list[tuple[float, float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S.%f")[:-3]


WIDTH = 960.0
LANE = 22.0


def drawing(
    events: list[dict[str, Any]],
    awake: list[tuple[float, float]],
    now: float,
    awake_lane: str = "database awake (est.)",
) -> dict[str, Any]:
    """The SVG's shapes: one lane per function (invocation bars), one for the other events
    (marks), one for the awake time (measured or estimated: `awake_lane` says which)."""
    runs = invocations(events)
    if not events:
        return {"bars": [], "marks": [], "lanes": [], "height": 0, "start": now, "end": now}
    start = min(float(e["at"]) for e in events)
    end = max(now, start + 1)
    scale = WIDTH / (end - start)
    functions = sorted({r.function for r in runs})
    lanes = ["events", *functions, awake_lane]
    bars = [
        Bar(
            x=(r.start - start) * scale,
            width=max(2.0, ((r.end or now) - r.start) * scale),
            y=(1 + functions.index(r.function)) * LANE,
            label=f"{r.function} {r.request_id[:8]} hop {r.hop} "
            f"{'running' if r.duration_ms is None else f'{r.duration_ms:.0f} ms'}",
            colour="#16a34a" if r.end is not None else "#65a30d",
        )
        for r in runs
    ]
    bars += [
        Bar(
            x=(a - start) * scale,
            width=max(2.0, (b - a) * scale),
            y=(len(lanes) - 1) * LANE,
            label=f"awake {when(a)} to {when(b)} ({b - a:.1f} s)",
            colour="#f59e0b",
        )
        for a, b in awake
        if b > start
    ]
    marks = [
        {
            "x": (float(e["at"]) - start) * scale,
            "colour": MARKS[e["kind"]],
            "label": f"{when(float(e['at']))} {e['kind']} {e.get('queue') or ''}",
        }
        for e in events
        if e["kind"] in MARKS
    ]
    return {
        "bars": bars,
        "marks": marks,
        "lanes": lanes,
        "height": len(lanes) * LANE,
        "start": start,
        "end": end,
    }
