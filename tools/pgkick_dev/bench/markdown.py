"""`bench.md`: one report, the speed figures and the cost figures side by side.

Why generated: the README's Performance tables are pasted from it, so no figure
there is typed by hand, and each repeated figure carries its spread. What no
item measures is said to be not measured, not left out.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import Any

from pgkick_dev.bench import artifact as bench_artifact
from pgkick_dev.bench import cold_path as bench_cold_path
from pgkick_dev.bench import cost_table as bench_cost_table
from pgkick_dev.bench import dependencies as bench_dependencies
from pgkick_dev.bench import figures as bench_figures
from pgkick_dev.bench import report as bench_report
from pgkick_dev.bench import trickle as bench_trickle
from pgkick_dev.bench.figures import ratio_text, shown


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
        + _table(["item", "measured"], _once(results)),
        "## Cost\n\n" + _table(["cost", "measured"], _cost(results)),
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


def _once(results: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    article = results.get("article")
    if article:
        naive, ours = article["naive"], article["pgkick"]
        rows.append(
            [
                f"the article's table (pgbench, {article['clients']} clients, "
                f"{article['jobs']:,} jobs)",
                f"naive claim: {naive.get('done', {}).get('count', 0):,} done, a job claimed up "
                f"to {naive.get('done', {}).get('max_attempts')} times; pgkick's claim + "
                f"complete: {ours.get('done', {}).get('count', 0):,} done, each once",
            ]
        )
    enqueue = results.get("enqueue", {})
    for key, label in (
        ("many", "`enqueue_many`, one commit"),
        ("single_none", "`enqueue_and_kick` one at a time (none kicker)"),
        ("single_local", "`enqueue_and_kick` one at a time (local kicker)"),
        ("single_in_app_transaction", "`pgkick.transaction(conn)`, one job each"),
        ("single_sql_ceiling", "the same insert in pgbench, 1 client, a commit each"),
    ):
        if key in enqueue:
            row = enqueue[key]
            latency = (
                f" (p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms)" if "p50_ms" in row else ""
            )
            rows.append([label, f"{row['jobs_per_s']:,} jobs/s{latency}"])
    for row in results.get("producer_threads", []):
        rows.append(
            [
                f"`enqueue_and_kick` from {row['threads']} thread(s) at once, durable commits",
                f"{row['jobs_per_s']:,} jobs/s ({row['versus_one_thread']}x one thread), "
                f"{row['sessions_opened']} sessions opened for {row['jobs']:,} jobs",
            ]
        )
    for peer, rows_of_peer in _by_peer(results.get("peers", [])).items():
        bulk = bench_figures.spread([r["bulk_enqueue_jobs_per_s"] for r in rows_of_peer])
        single = bench_figures.spread([r["single_enqueue_jobs_per_s"] for r in rows_of_peer])
        rows.append(
            [
                f"{peer}: bulk enqueue, single enqueue (its own API; median of its drains' runs)",
                f"{bulk['median']:,.0f} jobs/s, {single['median']:,.0f} jobs/s",
            ]
        )
    kick = results.get("kick_to_start_ms")
    if kick:
        rows.append(
            ["kick-to-start (commit to claim)", f"p50 {kick['p50']} ms, p99 {kick['p99']} ms"]
        )
    scale = results.get("scale")
    if scale:
        costs = scale["ms_per_claim_complete"]
        rows.append(
            [
                f"claim + complete, {scale['history_rows']:,} finished jobs of history vs none",
                f"{costs['history']} vs {costs['empty']} ms "
                f"(x{shown(scale['ratio'], bench_report.SCALE_TARGET, 2)})",
            ]
        )
    order = results.get("claim_order")
    if order:
        costs, ratio = order["ms_per_claim_complete"], order["ratio"]
        spreads = order.get("spread_ratio", {})

        def ratio_of(name: str, bound: float | None = None) -> str:
            """The median and the rounds' spread, on their side of the target if any."""

            def text(value: float) -> str:
                return shown(value, bound, 2) if bound is not None else f"{value:.2f}"

            low, high = spreads.get(name, {}).get("min"), spreads.get(name, {}).get("max")
            spread_text = f", x{text(low)}..x{text(high)}" if low is not None else ""
            return f"x{text(ratio[name])}{spread_text}"

        rows.append(
            [
                f"claim + complete at a {order['backlog']:,}-job backlog (median of "
                f"{order.get('rounds', 1)} rounds; each beside the claim before 0004, chunks "
                "interleaved; ratio within each round): "
                "before 0004, plain, priorities, priorities and groups",
                f"{costs['before_0004']}, {costs['plain']} ({ratio_of('plain')}), "
                f"{costs['priorities']} ({ratio_of('priorities')}), "
                f"{costs['priorities_and_groups']} ms "
                f"({ratio_of('priorities_and_groups', bench_report.CLAIM_GROUPS_TARGET)})",
            ]
        )
        if "rate_and_concurrency_per_key" in costs:
            keyed = order.get("spread_keyed_vs_plain", {})
            plain = order.get("plain_beside_keyed_ms", {}).get("median", costs["plain"])
            bound = bench_report.CLAIM_KEYED_TARGET
            rows.append(
                [
                    f"claim + complete with a rate and a concurrency per key, "
                    f"{order.get('keys', 0):,} keys, against the plain claim beside it "
                    "(one table, chunks interleaved; ratio within each round)",
                    f"{costs['rate_and_concurrency_per_key']} ms vs {plain} ms "
                    f"(x{shown(order['keyed_vs_plain'], bound, 2)}, "
                    f"x{shown(keyed['min'], bound, 2)}..x{shown(keyed['max'], bound, 2)})",
                ]
            )
    return rows


def _by_peer(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["peer"], []).append(row)
    return out


def _cost(results: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for row in results.get("kicks", []):
        rows.append(
            [
                f"invocations and worker sessions per job, single enqueues, {row['load']}",
                f"{row['invocations_per_job']} invocations, {row['worker_sessions_per_job']} "
                f"sessions per job ({row['invocations']} for {row['jobs']:,} jobs; "
                f"{row['lambda_seconds']} s of worker time)",
            ]
        )
    if not results.get("kicks"):
        rows.append(["invocations and sessions per job", "not measured (item kicks)"])
    peak = max((d["worker_peak_rss_mb"] for d in results.get("drain", [])), default=None)
    rows.append(
        ["worker peak memory (largest environment's VmHWM, over every drain)", f"{peak} MB"]
        if peak
        else ["worker peak memory", "not measured (item drain)"]
    )
    idle = results.get("idle_statements_per_minute")
    rows.append(
        [
            "statements a minute while idle (one waiting worker; pgkick: none running)",
            ", ".join(f"{name} {rate}" for name, rate in idle.items())
            if idle
            else "not measured (--peers)",
        ]
    )
    awake = results.get("awake")
    if awake:
        modes = ", ".join(
            f"{m['mode']} {m['awake_fraction'] * 100:.1f}% ({m['suspends']} suspends)"
            for m in awake["modes"]
        )
        minimum = awake["theoretical_min_fraction"] * 100
        rows.append(["awake fraction", f"{modes}; the workload's minimum {minimum:.1f}%"])
    else:
        rows.append(["awake fraction", "not measured (item awake)"])
    rows += bench_artifact.cost_rows(results.get("artifact"))
    rows += bench_dependencies.cost_rows(results.get("dependencies", []))
    return rows
