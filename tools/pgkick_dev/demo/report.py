"""The demo's verdict and summary: from the jobs table and the workers' own traces.

Why separate from the scenario: the checks (nothing lost, nothing run twice at
once, a rollback never kicked) are the point of the demo, and they read better
as a short list than woven into the steps.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pgkick.store.maintenance import MaintenanceStore
from pgkick_dev.bench.figures import percentile
from pgkick_dev.demo.scenario import DemoRun
from pgkick_dev.demo.traces import overlapping_runs, read_traces

# What a reader compares a run with (issue #27: 556 jobs/s on a loaded machine against the
# README's 1,853, with nothing saying whether that was a problem).
HEALTHY = (
    "a healthy run: OK below; every job done at attempt 1 except the flaky and the killed one "
    "(2 each);",
    "1-2 invocations for the trickle; pgkick awake well below poll and listen (near 100%).",
    "Rates and latencies vary with this machine and its load (other processes, a cold cache):",
    "a shared or busy machine can drain at a third of the README's sample and still be healthy.",
)


def summarise(run: DemoRun, jobs_in_burst: int) -> dict[str, Any]:
    with MaintenanceStore.open(run.dsn, application_name="pgkick-demo") as store:
        jobs = store.get_many(run.ids)
    by_status = Counter(job["status"] for job in jobs)
    attempts = Counter(job["attempts"] for job in jobs)
    singles = [j for j in jobs if j["id"] in set(run.single_ids) and j["claimed_at"]]
    latencies = [(j["claimed_at"] - j["created_at"]).total_seconds() * 1000 for j in singles]
    killed = next((j for j in jobs if j["id"] == run.killed_job), None)
    overlaps = overlapping_runs(read_traces(run.trace_dir))
    problems = []
    if len(jobs) != len(run.ids) or by_status.get("done", 0) != len(run.ids):
        problems.append(f"jobs not done: {dict(by_status)} of {len(run.ids)}")
    if overlaps:
        problems.append(f"jobs run twice at the same time: {overlaps[:10]}")
    if run.rolled_back_kicks:
        problems.append(f"a rolled-back enqueue kicked {run.rolled_back_kicks} worker(s)")
    if killed is None or killed["attempts"] != 2:
        problems.append(f"the killed job was not rescued once: {killed}")
    return {
        "ok": not problems,
        "problems": problems,
        "jobs": len(run.ids),
        "by_status": dict(by_status),
        "attempts": {str(k): v for k, v in sorted(attempts.items())},
        "burst_jobs_per_second": round(jobs_in_burst / run.drain_seconds)
        if run.drain_seconds
        else None,
        "single_invocations": run.single_invocations,
        "single_trickle": run.trickle,
        "kick_to_start_ms": {
            "p50": round(percentile(latencies, 0.5), 1),
            "p99": round(percentile(latencies, 0.99), 1),
        },
        "killed_job": {
            "id": run.killed_job,
            "attempts": killed and killed["attempts"],
            "last_error": killed and killed["last_error"],
        },
        "awake": run.awake,
    }


def render(summary: dict[str, Any], comparison: list[dict[str, Any]]) -> str:
    lines = [
        "",
        f"jobs: {summary['jobs']}  by status: {summary['by_status']}  "
        f"attempts: {summary['attempts']}",
        f"burst drain: {summary['burst_jobs_per_second']} jobs/s (cold starts included)",
        f"trickle of 20 single enqueues: {summary['single_invocations']} worker invocation(s) "
        f"in {summary['single_trickle']['environments']} environment(s); "
        f"commit-to-claim p50 {summary['kick_to_start_ms']['p50']} ms, "
        f"p99 {summary['kick_to_start_ms']['p99']} ms",
        f"killed job {summary['killed_job']['id']}: rescued, done at attempt "
        f"{summary['killed_job']['attempts']}",
        f"awake during the demo: {summary['awake'].get('awake_seconds')} s of "
        f"{summary['awake'].get('duration_seconds')} s, suspends "
        f"{summary['awake'].get('suspends')}, resumes {summary['awake'].get('resumes')}",
    ]
    if comparison:
        lines += [
            "",
            "the article's three options, same workload, compressed timeline:",
            f"{'mode':<8} {'awake':>7} {'suspends':>9} {'empty polls':>12} {'done':>6}",
        ]
        lines += [
            f"{r['mode']:<8} {r['awake_fraction'] * 100:>6.0f}% {r['suspends']:>9} "
            f"{r['empty_polls']:>12} {r['jobs_done']:>6}"
            for r in comparison
        ]
    lines += ["", *HEALTHY]
    lines.append("")
    lines.append(
        "OK: nothing lost, nothing run twice at once"
        if summary["ok"]
        else "FAILED: " + "; ".join(summary["problems"])
    )
    return "\n".join(lines)
