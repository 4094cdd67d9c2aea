"""The cost item's table: each workload's day, by system, in units and dollars; and the
linger the table chooses.

Why apart from the measuring (pgkick_dev.bench.cost): this is read by the report and by
the docs, and it is pure (the measured runs and a price table in, rows out), so a test
feeds it fixed runs and checks every figure.

The linger rule, stated once here and printed with the table: a linger is acceptable
when, on every workload, its day costs at most COST_SLACK more than the cheapest linger
measured (or CENTS_SLACK a day, whichever is larger: a cent is no reason); among the
acceptable, the one with the lowest commit-to-claim p99 on the steady workload (the
latency the linger exists for), the shorter one on a tie.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pgkick_dev.bench import cost as bench_cost
from pgkick_dev.bench import cost_model as model
from pgkick_dev.bench.prices import Prices

COST_SLACK = 0.10
CENTS_SLACK = 0.01
BATCH = {"trickle": 1, "steady": 1, "burst": 10}  # SQS batches: ASSUMED (no batching window)
HEADER = [
    "workload",
    "system",
    "invocations/day",
    "GB-s/day",
    "Scheduler calls / fires",
    "secret reads",
    "SQS requests",
    "database awake h",
    "$/day",
    "$/30 days",
]


def build(runs: list[dict[str, Any]], prices: Prices, memory_mb: int) -> dict[str, Any]:
    """Every workload's days (pgkick at each linger, the two models), priced."""
    days: list[dict[str, Any]] = []
    for kind in bench_cost.PER_DAY:
        mine = [r for r in runs if r["workload"] == kind]
        if not mine:
            continue
        ours = {
            r["linger_ms"]: bench_cost.pgkick_day(r, memory_mb, prices.neon_suspend_seconds)
            for r in mine
        }
        job_ms, overhead_ms = job_durations(runs)
        shortest = ours[min(ours)]
        for linger, day in ours.items():
            run = next(r for r in mine if r["linger_ms"] == linger)
            days.append(_row(kind, day, prices, linger=linger, run=run))
        # twice: with pgkick's one-job invocation overhead (connect, claim, record, the
        # rescue's booking: an upper bound), and with the jobs' time alone (a lower one)
        for overhead, bound in ((overhead_ms, "upper"), (0.0, "lower")):
            sqs = model.sqs_lambda(
                bench_cost.PER_DAY[kind],
                job_ms=job_ms,
                batch=BATCH[kind],
                overhead_ms=overhead,
                memory_mb=memory_mb,
                secrets=shortest.secret_calls,
                database_hours=shortest.database_hours,
                prices=prices,
            )
            days.append(_row(kind, replace(sqs, system=f"{sqs.system}, {bound} bound"), prices))
        days.append(_row(kind, model.always_on(bench_cost.PER_DAY[kind]), prices))
    job_ms, overhead_ms = job_durations(runs)
    return {
        "memory_mb": memory_mb,
        "job_ms": round(job_ms, 3),
        "invocation_overhead_ms": round(overhead_ms, 3),
        "days": days,
        "linger": choose_linger(days),
        "prices": prices.sources(),
    }


def job_durations(runs: list[dict[str, Any]]) -> tuple[float, float]:
    """The per-job time (the shortest linger's burst: billed ms per job, claims and records
    included) and a one-job invocation's overhead beyond it (the shortest linger's
    trickle: the median invocation less the job): the SQS model's 'same job durations'."""

    def shortest(kind: str) -> dict[str, Any] | None:
        mine = [r for r in runs if r["workload"] == kind]
        return min(mine, key=lambda r: r["linger_ms"]) if mine else None

    burst, trickle = shortest("burst"), shortest("trickle")
    job_ms = burst["billed_ms"] / burst["jobs"] if burst else 1.0
    overhead = max(0.0, trickle["duration_p50_ms"] - job_ms) if trickle else 0.0
    return job_ms, overhead


def _row(
    kind: str,
    day: model.Day,
    prices: Prices,
    *,
    linger: int | None = None,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    bill = model.price(day, prices)
    row: dict[str, Any] = {"workload": kind, "linger_ms": linger, **day.as_dict(), "bill": bill}
    if run is not None:
        row["commit_to_claim_p99_ms"] = run["commit_to_claim_p99_ms"]
        row["exactly_once"] = run["exactly_once"]
    return row


def choose_linger(days: list[dict[str, Any]]) -> dict[str, Any]:
    """The module's rule applied to pgkick's rows."""
    ours = [d for d in days if d["linger_ms"] is not None]
    lingers = sorted({d["linger_ms"] for d in ours})
    if not lingers:
        return {"chosen_ms": None, "why": "no pgkick row"}
    acceptable = []
    for linger in lingers:
        fits = True
        for kind in {d["workload"] for d in ours}:
            costs = {d["linger_ms"]: d["bill"]["total"] for d in ours if d["workload"] == kind}
            cheapest = min(costs.values())
            if costs[linger] > cheapest + max(COST_SLACK * cheapest, CENTS_SLACK):
                fits = False
        if fits:
            acceptable.append(linger)
    steady = {
        d["linger_ms"]: d.get("commit_to_claim_p99_ms", 0)
        for d in ours
        if d["workload"] == "steady"
    }
    chosen = min(acceptable, key=lambda lg: (steady.get(lg, 0), lg)) if acceptable else lingers[0]
    return {
        "chosen_ms": chosen,
        "acceptable_ms": acceptable,
        "steady_p99_ms": steady,
        "rule": f"within {COST_SLACK:.0%} (or ${CENTS_SLACK}/day) of the cheapest linger on "
        "every workload, then the lowest steady commit-to-claim p99",
    }


def target(cost: dict[str, Any] | None) -> tuple[str, Any, bool]:
    """The linger default is the one the table chooses (issue 32)."""
    from pgkick.variables import BY_NAME

    default = int(str(BY_NAME["PGKICK_WORKER_LINGER_MS"].default))
    label = f"PGKICK_WORKER_LINGER_MS's default ({default} ms) is the cost table's choice"
    if not cost:
        return (label, "not measured (item cost)", False)
    linger = cost["linger"]
    measured = f"table chooses {linger['chosen_ms']} ms of {sorted(linger['steady_p99_ms'])}"
    return (label, measured, linger["chosen_ms"] == default)


def table(cost: dict[str, Any]) -> list[list[Any]]:
    """bench.md's rows."""
    rows = []
    for d in cost["days"]:
        rows.append(
            [
                bench_cost.LABELS[d["workload"]],
                d["system"],
                f"{d['invocations']:,}",
                f"{d['gb_seconds']:,.1f}",
                f"{d['scheduler_calls']:,} / {d['scheduler_invocations']:,}",
                f"{d['secret_calls']:,}",
                f"{d['sqs_requests']:,}",
                f"{d['database_hours']:.2f}",
                f"{d['bill']['total']:.4f}",
                f"{d['bill']['total'] * 30:.2f}",
            ]
        )
    return rows


RUNS_HEADER = [
    "workload",
    "linger ms",
    "jobs in",
    "invocations (cold)",
    "billed ms (p50 / max per invocation)",
    "producer kicks",
    "empty invocation ms (a safety's)",
    "commit-to-claim p50 / p99 ms",
    "database active s",
    "every job once",
]


def runs_table(runs: list[dict[str, Any]]) -> list[list[Any]]:
    """What each run measured, before any scaling to a day."""
    return [
        [
            bench_cost.LABELS[r["workload"]],
            r["linger_ms"],
            f"{r['jobs']:,} in {r['seconds']} s",
            f"{r['invocations']} ({r['cold_starts']})",
            f"{r['billed_ms']:,} ({r['duration_p50_ms']} / {r['duration_max_ms']})",
            r["kicks"],
            r["empty_ms"],
            f"{r['commit_to_claim_p50_ms']} / {r['commit_to_claim_p99_ms']}",
            r["awake_seconds"],
            "yes" if r["exactly_once"] else "**no**",
        ]
        for r in runs
    ]
