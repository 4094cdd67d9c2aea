"""`bench.md`: one report, the speed figures and the cost figures side by side.

Why generated: the README's Performance tables are pasted from it, so no figure
there is typed by hand, and each repeated figure carries its spread. What no
item measures is said to be not measured, not left out. This module lays the page out;
the rows of its two tables of figures measured once are single_figures.py's.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import Any

from pgkick_dev.bench import cold_path as bench_cold_path
from pgkick_dev.bench import cost_table as bench_cost_table
from pgkick_dev.bench import figures as bench_figures
from pgkick_dev.bench import report as bench_report
from pgkick_dev.bench import trickle as bench_trickle
from pgkick_dev.bench.figures import ratio_text, shown
from pgkick_dev.bench.single_figures import cost_rows, other_rows


def render(results: dict[str, Any]) -> str:
    summary = bench_figures.summary(results)
    repeats = results.get("repeat", 1)
    parts = [
        f"# pgkick bench, run of {results.get('date', '?')}\n\n"
        f"{repeats} repeat(s) of the compared items, interleaved (ceiling, pgkick, peers); "
        f"{'quick sizes' if results.get('quick') else 'full sizes'}; "
        f"{results.get('seconds', '?')} s in all.\n",
        "## Targets\n\n" + _table(["target", "measured", "met"], _targets(results)),
        "## Speed: median of the repeats (min..max)\n\n"
        + _table(
            ["figure", "jobs/s", "min..max", "every job run once (peers: none left)"],
            _figures(
                summary["figures"],
                bench_figures.unfinished(results),
                bench_figures.not_warm(results),
            ),
        ),
        "## Ratios, pair by pair: taken within each repeat\n\n"
        + _table(["ratio", "median", "min..max", "each repeat"], _ratios(summary["ratios"])),
        "## Other figures (one run; the peers' enqueue rates: median of the repeats)\n\n"
        + _table(["item", "measured"], other_rows(results)),
        "## Cost\n\n" + _table(["cost", "measured"], cost_rows(results)),
    ]
    if results.get("trickle"):
        parts.append(
            "## Latency: a 20 jobs/s trickle, one lingering worker (item trickle)\n\n"
            + _table(bench_trickle.HEADER, bench_trickle.table(results["trickle"]))
        )
    if results.get("cold_path"):
        parts.append(_cold_path(results["cold_path"]))
    if results.get("cost"):
        parts.append(_dollars(results["cost"]))
    return "\n".join(parts)


def _cold_path(cold: dict[str, Any]) -> str:
    """Commit-to-claim on a new environment, beside the floor (item cold_path)."""
    rows = [
        [name, row["p50"], row["p99"], f"{row['min']}..{row['max']}"]
        for name, row in (
            ("pgkick worker (`pgkick.aws.worker`): commit to claim", cold["worker_ms"]),
            ("pgkick worker: commit to the job's finish (no floor)", cold["worker_done_ms"]),
            ("floor (import psycopg + connect): commit to connected", cold["floor_ms"]),
        )
    ]
    pairs = cold["ratio_pairs"]
    return (
        f"## Cold path: a kick that starts a new environment (item cold_path, "
        f"{cold['samples']} cold starts each, interleaved)\n\n"
        + _table(["handler", "p50 ms", "p99 ms", "min..max ms"], rows)
        + f"\nRatio to the floor: p50 x{shown(cold['ratio_p50'], bench_cold_path.TARGET, 2)}, "
        f"p99 x{cold['ratio_p99']:.2f}; "
        f"sample by sample median x{pairs['median']} (x{pairs['min']}..x{pairs['max']}).\n"
    )


def _dollars(cost: dict[str, Any]) -> str:
    """The cost model's day of each workload, by system, and the linger it chooses."""
    linger = cost["linger"]
    return (
        "## Dollars a day: three workloads, by system (item cost)\n\n"
        + _table(bench_cost_table.HEADER, bench_cost_table.table(cost))
        + f"\nWorker memory {cost['memory_mb']} MB ({cost['memory_from']}); the SQS + Lambda "
        f"model's job {cost['job_ms']} ms and one-job invocation overhead "
        f"{cost['invocation_overhead_ms']} ms, from the shortest linger's burst and trickle. "
        f"Linger chosen: **{linger['chosen_ms']} ms** (rule: {linger['rule']}; acceptable "
        f"{linger['acceptable_ms']}; steady p99 by linger {linger['steady_p99_ms']}). "
        "Safety wake-ups are off in the runs and added to each day: one per minute with a "
        "kick (a producer's, or a hand-over's), each a CreateSchedule call, a fire and an "
        "invocation billed as the run's empty one.\n\n"
        "What each run measured, before scaling to a day:\n\n"
        + _table(bench_cost_table.RUNS_HEADER, bench_cost_table.runs_table(cost["runs"]))
        + "\nPrices: "
        + "; ".join(cost["prices"])
        + ".\n"
    )


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _targets(results: dict[str, Any]) -> list[list[Any]]:
    return [
        [t["target"], t["measured"], "yes" if t["met"] else "**no**"]
        for t in results.get("targets", [])
    ]


def _figures(
    figures: dict[str, dict[str, Any]],
    unfinished: dict[str, list[str]],
    not_warm: dict[str, str],
) -> list[list[Any]]:
    """Each rate beside whether its drains ran every job once (a rate of jobs that did not
    all run is flagged, with why); a warm drain that started environments says so."""
    return [
        [
            f"{name} (**not all warm**: {not_warm[name]})" if name in not_warm else name,
            f"{s['median']:,.0f}",
            f"{s['min']:,.0f}..{s['max']:,.0f}",
            f"**no**: {'; '.join(unfinished[name])}" if name in unfinished else "yes",
        ]
        for name, s in figures.items()
    ]


def _ratios(ratios: dict[str, dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for name, s in ratios.items():
        unit = "%" if "ceiling" in name else "x"
        bound = bench_report.CEILING_TARGET if unit == "%" else bench_report.PEERS_TARGET
        text = partial(ratio_text, unit=unit, threshold=bound)  # on their target's side
        rows.append(
            [
                name,
                text(statistics.median(s["values"])),  # spread's median is rounded
                f"{text(s['min'])}..{text(s['max'])}",
                ", ".join(text(v) for v in s["values"]),
            ]
        )
    return rows
