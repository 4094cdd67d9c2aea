"""The rows of bench.md's two tables of figures each item measures once, beside the
repeated speed figures: "Other figures" (enqueue rates, the article's table, the claim's
costs) and "Cost" (invocations, memory, idle statements, awake time, the artifact).

Why apart from the page (markdown.py): each row reads one item's own results (an item
that did not run: its row left out of the other figures, said "not measured" among the
costs), so these grow with every new item while the page's layout does not.
"""

from __future__ import annotations

from typing import Any

from pgkick_dev.bench import artifact as bench_artifact
from pgkick_dev.bench import dependencies as bench_dependencies
from pgkick_dev.bench import figures as bench_figures
from pgkick_dev.bench import report as bench_report
from pgkick_dev.bench.figures import shown


def other_rows(results: dict[str, Any]) -> list[list[Any]]:
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


def cost_rows(results: dict[str, Any]) -> list[list[Any]]:
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
