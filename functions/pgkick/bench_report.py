"""The benchmark's verdict: each target of the performance issue, this run's figure, met or not.

Why apart: the measurements change as pgkick gets faster; the targets and how
they are read do not, and a reader should find them in one short place.
"""

from __future__ import annotations

from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of the values (nearest rank), rounded to 0.01; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue, with this run's figure and whether it was met."""
    ceiling = results.get("ceiling", {}).get("jobs_per_s") or 0
    drains = results.get("drain", [])
    # the ceiling runs batch 10: held against pgkick's cold drains at batch 10
    best = max(
        (d["jobs_per_s"] for d in drains if (d["start"], d["batch"]) == ("cold", 10)), default=0
    )
    enqueue = results.get("enqueue", {})
    awake = results.get("awake", {})
    modes = {m["mode"]: m for m in awake.get("modes", [])}
    idle = results.get("idle_statements_per_minute", {})
    kicks = {row["load"]: row for row in results.get("kicks", [])}
    rows = [
        *_kick_targets(kicks),
        *_quiet_day_targets(results.get("quiet_day", {})),
        *_versus_peers(drains, results.get("peers", [])),
        (
            "drain >= 50% of the SQL ceiling",
            f"{best} of {ceiling} jobs/s",
            bool(ceiling) and best >= 0.5 * ceiling,
        ),
        (
            "enqueue_many >= 100,000 jobs/s",
            enqueue.get("many", {}).get("jobs_per_s"),
            (enqueue.get("many", {}).get("jobs_per_s") or 0) >= 100_000,
        ),
        (
            "single enqueue_and_kick (none) >= 5,000 jobs/s",
            enqueue.get("single_none", {}).get("jobs_per_s"),
            (enqueue.get("single_none", {}).get("jobs_per_s") or 0) >= 5_000,
        ),
        (
            "kick-to-start p50 <= 50 ms",
            results.get("kick_to_start_ms", {}).get("p50"),
            (results.get("kick_to_start_ms", {}).get("p50") or 1e9) <= 50,
        ),
        (
            "claim cost at history within 1.5x",
            results.get("scale", {}).get("ratio"),
            (results.get("scale", {}).get("ratio") or 1e9) <= 1.5,
        ),
        (
            "pgkick awake within 10% of the minimum (awake <= 1.1 x minimum)",
            f"{modes.get('pgkick', {}).get('awake_fraction')} vs "
            f"{awake.get('theoretical_min_fraction')}",
            bool(modes)
            and modes["pgkick"]["awake_fraction"] <= 1.10 * awake["theoretical_min_fraction"],
        ),
        (
            "zero statements while idle (pgkick, statements a minute)",
            idle.get("pgkick", "not measured (--peers)"),
            idle.get("pgkick") == 0,
        ),
        (
            "polling worker awake 100%",
            modes.get("poll", {}).get("awake_fraction"),
            bool(modes) and modes["poll"]["suspends"] == 0,
        ),
    ]
    return [{"target": t, "measured": m, "met": bool(ok)} for t, m, ok in rows]


def _kick_targets(kicks: dict[str, dict[str, Any]]) -> list[tuple[str, Any, bool]]:
    """Invocations per job of single enqueues on the faithful kicker (it was 1.00)."""
    rows = []
    for load, bound in (("steady 50/s", 0.05), ("steady 400/s", 0.05), ("burst of", 0.01)):
        row = next((r for name, r in kicks.items() if name.startswith(load)), None)
        label = f"invocations per job <= {bound} ({load}, every job done once)"
        if row is None:
            rows.append((label, "not measured", False))
            continue
        measured = (
            f"{row['invocations_per_job']} ({row['invocations']} for {row['jobs']} jobs; "
            f"{row['worker_sessions_per_job']} worker sessions per job)"
        )
        rows.append((label, measured, row["invocations_per_job"] <= bound and row["exactly_once"]))
    return rows


def _quiet_day_targets(day: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """The reaper's share of a quiet day, and how late stranded jobs were rescued."""
    daily = day.get("daily reaper", {}).get("awake_fraction_after_first_window")
    hourly = day.get("hourly reaper", {}).get("awake_fraction_after_first_window")
    played = day.get("a day with a crash and a lost kick", {})
    crash = played.get("crash_restarted_after_lease_s")
    lost = played.get("lost_kick_waited_scaled_minutes")
    return [
        (
            "reaper's awake share of a quiet day <= 1% (daily; hourly for comparison)",
            f"{daily} (hourly: {hourly})",
            daily is not None and daily <= 0.01,
        ),
        (
            "a crashed worker's job restarted within its lease + 2 min (real seconds past it)",
            crash,
            crash is not None and crash <= 120,
        ),
        (
            "a lost kick's job run within 2 min (scaled minutes from its commit)",
            lost,
            lost is not None and lost <= 2,
        ),
    ]


def _versus_peers(
    drains: list[dict[str, Any]], peers: list[dict[str, Any]]
) -> list[tuple[str, Any, bool]]:
    """pgkick against the best peer on the same jobs: start-up included, and warm."""
    rows = []
    for start, key, how in (
        ("cold", "jobs_per_s_with_startup", "start-up included"),
        ("warm", "jobs_per_s_warm", "warm workers"),
    ):
        label = f"drain >= 1.5x the best peer ({how}; best of each)"
        jobs = peers[0]["jobs"] if peers else None
        same = [d for d in drains if (d["start"], d["jobs"]) == (start, jobs)]
        ours = max(same, key=lambda d: d["jobs_per_s"], default=None)
        best = max(peers, key=lambda p: p[key], default=None)
        if ours is None or best is None:
            rows.append((label, "peers not run (--peers)", False))
            continue
        measured = (
            f"{ours['jobs_per_s']} ({ours['workers']}x{ours['batch']}) vs {best[key]} jobs/s "
            f"({best['peer']}, {best['processes']}x{best['batch']})"
        )
        rows.append((label, measured, ours["jobs_per_s"] >= 1.5 * best[key]))
    return rows


def markdown(results: dict[str, Any]) -> str:
    lines = ["| target | measured | met |", "| --- | --- | --- |"]
    lines += [
        f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |"
        for t in results["targets"]
    ]
    return "\n".join(lines) + "\n"
