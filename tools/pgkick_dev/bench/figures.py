"""Turning measurements into figures: percentiles, and the repeats read pair by pair.

Pure functions over the results dictionary, apart from the code that measures
(pgkick_dev.bench.runner, .repeat) and the code that judges (.report), so each of
those may use them without importing the others.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of the values (nearest rank: the ceil(q * n)-th smallest), rounded to
    0.01; 0 for none. p99 of 100 samples is the 99th, not the maximum; p50 of an even count
    the lower middle (a median that says so uses statistics.median). q * n is rounded to 9
    digits before its ceiling: 0.07 * 100 is 7.000000000000001 in floats."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(round(q * len(ordered), 9))
    return round(ordered[min(len(ordered), max(1, rank)) - 1], 2)


def shown(value: float, threshold: float, digits: int) -> str:
    """`value` to `digits` decimals, or to as many more as it takes to stay on its side of
    `threshold`: a verdict is taken on the unrounded figure, and the figure beside it must
    not contradict it (1.496 against a 1.5 target reads "1.496", not "1.5" beside a "no")."""
    for places in range(digits, digits + 8):
        text = f"{value:.{places}f}"
        if (float(text) > threshold, float(text) < threshold) == (
            value > threshold,
            value < threshold,
        ):
            return text
    return repr(value)


def ratio_text(value: float, unit: str, threshold: float | None = None) -> str:
    """0.853 as "85%", or 4.52 as "x4.5"; with more digits where that rounding would land on
    or across `threshold` (0.796 against 0.8: "79.6%"), so a figure never reads as meeting a
    target it missed."""
    if unit == "%":
        if threshold is None:
            return f"{value * 100:.0f}%"
        # as percentages, without the float's tail (0.8 * 100 is 80.00000000000001)
        return f"{shown(round(value * 100, 9), round(threshold * 100, 9), 0)}%"
    if threshold is None:
        return f"x{value:.1f}"
    return f"x{shown(value, threshold, 1)}"


def spread(values: list[float]) -> dict[str, Any]:
    """Median, min and max, and the values in repeat order (the median rounded for display:
    a target reads its values unrounded)."""
    return {
        "median": round(statistics.median(values), 2) if values else None,
        "min": min(values, default=None),
        "max": max(values, default=None),
        "values": values,
    }


def _by_repeat(rows: Iterable[dict[str, Any]], key: str) -> dict[int, float]:
    return {row.get("repeat", 0): float(row[key]) for row in rows}


def figures(results: dict[str, Any]) -> dict[str, dict[int, float]]:
    """Every repeated rate, named, by repeat."""
    out: dict[str, dict[int, float]] = {}
    ceilings: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for row in results.get("ceiling", []):
        ceilings.setdefault((row["clients"], row["batch"], row["jobs"]), []).append(row)
    for (clients, batch, jobs), rows in ceilings.items():
        out[f"SQL ceiling, {clients}x{batch}, {jobs:,} jobs"] = _by_repeat(rows, "jobs_per_s")
    drains: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in results.get("drain", []):
        drains.setdefault((row["workers"], row["batch"], row["jobs"], row["start"]), []).append(row)
    for (workers, batch, jobs, start), rows in drains.items():
        out[f"pgkick, {workers}x{batch}, {jobs:,} jobs, {_start(start)}"] = _by_repeat(
            rows, "jobs_per_s"
        )
    peers: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in results.get("peers", []):
        peers.setdefault((row["peer"], row["processes"], row["batch"], row["jobs"]), []).append(row)
    for (peer, processes, batch, jobs), rows in peers.items():
        for start, key in (("cold", "jobs_per_s_with_startup"), ("warm", "jobs_per_s_warm")):
            name = f"{peer}, {processes}x{batch}, {jobs:,} jobs, {_start(start)}"
            out[name] = _by_repeat(rows, key)
    return out


def unfinished(results: dict[str, Any]) -> dict[str, list[str]]:
    """Every repeated rate whose drain did not run each of its jobs once, named as figures()
    names it, with why, repeat by repeat: the ceiling's pgbench finishing fewer jobs than it
    was given; pgkick's executions short of its jobs or not each done once, or its wait for
    the stack to be idle timed out; a peer's jobs left when its workers exited. Such a rate
    divides jobs that did not all run by the time: it is shown flagged and no target is
    judged on it."""
    out: dict[str, list[str]] = {}
    for row in results.get("ceiling", []):
        if row.get("done", row["jobs"]) < row["jobs"]:
            name = f"SQL ceiling, {row['clients']}x{row['batch']}, {row['jobs']:,} jobs"
            why = f"repeat {row.get('repeat', 0)} finished {row['done']:,} of {row['jobs']:,} jobs"
            out.setdefault(name, []).append(why)
    for row in results.get("drain", []):
        if row.get("exactly_once", True) and not row.get("timed_out", False):
            continue
        why = (
            f"repeat {row.get('repeat', 0)} ran {row.get('executions', 0):,} executions of "
            f"{row['jobs']:,} jobs"
        )
        why += "" if row.get("exactly_once", True) else ", not each done once"
        why += ", the wait timed out" if row.get("timed_out") else ""
        name = f"pgkick, {row['workers']}x{row['batch']}, {row['jobs']:,} jobs"
        out.setdefault(f"{name}, {_start(row['start'])}", []).append(why)
    for row in results.get("peers", []):
        if left := row.get("jobs_left", 0):
            why = f"repeat {row.get('repeat', 0)} left {left:,} of {row['jobs']:,} jobs undone"
            name = f"{row['peer']}, {row['processes']}x{row['batch']}, {row['jobs']:,} jobs"
            for start in ("cold", "warm"):
                out.setdefault(f"{name}, {_start(start)}", []).append(why)
    return out


def not_warm(results: dict[str, Any]) -> dict[str, str]:
    """Each warm drain's figure, named as figures() names it, whose drains started an
    environment (its stack retired one between the cold drain and the warm one): said
    beside it in bench.md, as its rate then includes a start-up."""
    out: dict[str, list[str]] = {}
    for row in results.get("drain", []):
        if row["start"] == "warm" and row.get("cold_starts"):
            name = f"pgkick, {row['workers']}x{row['batch']}, {row['jobs']:,} jobs, warm"
            why = f"repeat {row.get('repeat', 0)} had {row['cold_starts']} cold starts"
            out.setdefault(name, []).append(why)
    return {name: "; ".join(why) for name, why in out.items()}


def _start(start: str) -> str:
    return "start-up included" if start == "cold" else "warm"


def ratios(results: dict[str, Any]) -> dict[str, dict[int, float]]:
    """Each ratio taken within a repeat: pgkick's drain over the ceiling of the same clients,
    batch and jobs; pgkick's best configuration over the best peer configuration. Unrounded:
    the targets are judged on them (0.796 rounded to 0.8 met a ">= 0.8"); display rounds."""
    out: dict[str, dict[int, float]] = {}
    drains = results.get("drain", [])
    for row in results.get("ceiling", []):
        for start in ("cold", "warm"):
            same = [
                d
                for d in drains
                if (d["workers"], d["batch"], d["jobs"], d["start"], d.get("repeat", 0))
                == (row["clients"], row["batch"], row["jobs"], start, row["repeat"])
            ]
            if same and row["jobs_per_s"]:
                name = (
                    f"pgkick / SQL ceiling, {row['clients']}x{row['batch']}, "
                    f"{row['jobs']:,} jobs, {_start(start)}"
                )
                out.setdefault(name, {})[row["repeat"]] = same[0]["jobs_per_s"] / row["jobs_per_s"]
    peers = results.get("peers", [])
    for start, key in (("cold", "jobs_per_s_with_startup"), ("warm", "jobs_per_s_warm")):
        for index in sorted({p.get("repeat", 0) for p in peers}):
            theirs = [p for p in peers if p.get("repeat", 0) == index]
            jobs = theirs[0]["jobs"]
            ours = [
                d["jobs_per_s"]
                for d in drains
                if (d["start"], d["jobs"], d.get("repeat", 0)) == (start, jobs, index)
            ]
            best = max(p[key] for p in theirs)
            if ours and best:
                name = f"pgkick's best / the best peer's, {jobs:,} jobs, {_start(start)}"
                out.setdefault(name, {})[index] = max(ours) / best
    return out


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Median and spread of every repeated figure and every ratio."""
    return {
        "figures": {name: spread(list(v.values())) for name, v in figures(results).items()},
        "ratios": {name: spread(list(v.values())) for name, v in ratios(results).items()},
    }
