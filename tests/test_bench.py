"""`pgkick bench --quick` end to end on tiny sizes, so the benchmark cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgkick import cli

pytestmark = pytest.mark.slow  # about 6 minutes here: started first (conftest)


def test_bench_quick_runs_every_item_and_reports_targets(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["bench", "--quick", "--dsn", dsn, "--out", str(tmp_path), "--json"])
    assert code == 0, capsys.readouterr().err[-2000:]
    results = json.loads(capsys.readouterr().out)
    article = results["article"]
    jobs = article["jobs"]
    assert article["naive"]["done"]["count"] < jobs  # the article's lost claims
    assert article["naive"]["done"]["max_attempts"] > 1  # and double claims
    assert article["pgkick"]["done"] == {"count": jobs, "max_attempts": 1}
    # the pipelined ceiling, for each drain configuration it bounds, and the pairs' ratios
    assert {(c["clients"], c["batch"]) for c in results["ceiling"]} == {(2, 10), (2, 25)}
    assert all(c["jobs_per_s"] > 0 for c in results["ceiling"]) and results["repeat"] == 1
    ratios = results["repeats"]["ratios"]
    assert len([name for name in ratios if "SQL ceiling" in name]) == 4, ratios
    assert all(row["exactly_once"] and row["worker_peak_rss_mb"] > 0 for row in results["drain"])
    assert results["enqueue"]["many"]["jobs_per_s"] > 0
    assert results["kick_to_start_ms"]["samples"] > 0
    assert results["scale"]["ratio"] > 0
    assert set(results["claim_order"]["ratio"]) == {"plain", "priorities", "priorities_and_groups"}
    assert results["claim_order"]["keyed_vs_plain"] > 0
    modes = {m["mode"]: m for m in results["awake"]["modes"]}
    assert set(modes) == {"pgkick", "poll", "listen"}
    kicks = {row["load"]: row for row in results["kicks"]}
    assert all(row["exactly_once"] for row in kicks.values()), kicks
    # the worker's linger is what merges a trickle's kicks: without it, far more invocations
    assert kicks["steady 50/s"]["invocations"] < kicks["steady 50/s, linger off"]["invocations"]
    day = results["quiet_day"]
    assert day["hourly reaper"]["awake_fraction"] > day["daily reaper"]["awake_fraction"]
    played = day["a day with a crash and a lost kick"]
    assert played["jobs_by_status"] == {"done": 3 * 20 + 2} and played["crash_attempts"] == 2
    threads = {row["threads"]: row for row in results["producer_threads"]}
    assert set(threads) == {1, 4, 8, 16} and all(r["exactly_once"] for r in threads.values())
    assert all(r["sessions_opened"] <= r["threads"] for r in threads.values()), threads
    labels = " | ".join(t["target"] for t in results["targets"])
    assert "claim with priorities" in labels and "8 producer threads" in labels, labels
    # issue 14's costs of a cold start, from the artifact `sam build` makes (bench_artifact)
    artifact = results["artifact"]
    assert set(artifact["handlers"]) == {"WorkerFunction", "ReaperFunction"}, artifact
    assert 5 < artifact["size_mib"] < 49 and artifact["imports"] == 3
    assert all(row["import_ms"]["median"] > 0 for row in artifact["handlers"].values())
    assert "artifact size <= 15 MiB" in labels and "cold import of each handler" in labels
    # issue 32: the trickle with the NOTIFY wake-up and on pauses only, every job done once
    trickle = {row["load"]: row for row in results["trickle"]}
    assert set(trickle) == {"trickle 20/s, listen", "trickle 20/s, pauses only"}, trickle
    assert all(row["exactly_once"] for row in trickle.values()), trickle
    # both readings of "served": after the first batch is a later start, so fewer jobs
    assert all(
        row["after_first_batch_jobs"] <= row["warm_jobs"] <= row["jobs"] for row in trickle.values()
    ), trickle
    assert "one lingering worker" in labels and "## Latency" in (tmp_path / "bench.md").read_text()
    faulted = day["a day with drops, duplicates and throttles, no reaper"]
    assert faulted["jobs"] == 60 and faulted["claimed_more_than_once"] == 0, faulted
    bookings = results["delayed_bookings"]  # issue 30: off the commit path, one call a minute
    assert bookings["all_booked"] and bookings["scheduler_calls"] == bookings["distinct_minutes"]
    assert results["cold_path"]["samples"] and results["cost"]["days"]  # test_bench_cost_items
    assert all(
        row["all_done"] for row in results["dependencies"]
    )  # the figures: test_bench_quick_dependencies_*
    # issue 32's producer targets: one caller beside pgbench, turn by turn over one stretch
    beside = results["enqueue"]["single_beside_pgbench"]
    assert beside["turns"] == 8 and len(beside["pairs"]) == 8, beside
    assert beside["pgkick_jobs_per_s"] > 0 and beside["pgbench_jobs_per_s"] > 0
    assert "0.85x pgbench's same insert" in labels and "16 producer threads" in labels
    assert len(results["targets"]) == 34 and all(
        isinstance(t["met"], bool) for t in results["targets"]
    )
    # the lost kick in real time waits minutes a sample: full runs only, said so (not met)
    (lost,) = [t for t in results["targets"] if "within 2 min, real time" in t["target"]]
    assert lost["measured"].startswith("not measured") and lost["met"] is False
    report = (tmp_path / "bench.md").read_text()
    assert report.startswith("# pgkick bench, run of ")
    for section in ("## Targets", "## Speed", "## Ratios", "## Other figures", "## Cost"):
        assert section in report
    assert "invocations and worker sessions per job" in report and "awake fraction" in report
    assert "priorities and groups" in report
    assert (
        "cold import of `pgkick.aws.worker`" in report
        and "cold import of `pgkick.aws.reaper`" in report
    )


def test_bench_quick_cost_and_cold_path_report_their_figures(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32's cost model and cold path, run alone (about 30 s): each workload at each
    linger done once, priced by system, and the cold path beside its floor."""
    arguments = ["--items", "cold_path,cost", "--dsn", dsn, "--out", str(tmp_path), "--json"]
    code = cli.main(["bench", "--quick", *arguments])
    assert code == 0, capsys.readouterr().err[-2000:]
    results = json.loads(capsys.readouterr().out)
    report = (tmp_path / "bench.md").read_text()
    cold = results["cold_path"]  # a new environment's commit-to-claim, and the floor's
    assert cold["samples"] == 2 and cold["worker_ms"]["p50"] > 0 and cold["floor_ms"]["p50"] > 0
    assert cold["ratio_p50"] > 0 and "a kick that starts a new environment" in report
    assert cold["worker_done_ms"]["min"] >= cold["worker_ms"]["min"]  # a job ends after its claim
    assert "commit to the job's finish" in report
    cost = results["cost"]  # three workloads' days in dollars, by system
    runs = {(r["workload"], r["linger_ms"]) for r in cost["runs"]}
    assert runs == {(w, lg) for w in ("trickle", "steady", "burst") for lg in (0, 1000)}
    assert all(r["exactly_once"] and r["billed_ms"] >= r["invocations"] > 0 for r in cost["runs"])
    systems = [(d["workload"], d["system"].split(",")[0]) for d in cost["days"]]
    assert len(systems) == 15 and all(d["bill"]["total"] > 0 for d in cost["days"]), systems
    assert cost["memory_mb"] == 512 and cost["memory_from"] == "template.yaml"
    assert cost["linger"]["chosen_ms"] in (0, 1000) and "Dollars a day" in report
    assert "us-east-1, read on" in report and "ASSUMED" in report  # the prices, cited
    labels = [t["target"] for t in results["targets"]]
    assert any("cold path" in label for label in labels)
    assert any("LINGER_MS's default" in label for label in labels)


def test_bench_quick_peers_drain_the_same_jobs_and_count_idle_statements(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["--items", "drain,enqueue", "--peers", "--json", "--dsn", dsn]
    arguments += ["--out", str(tmp_path)]
    code = cli.main(["bench", "--quick", *arguments])
    assert code == 0, capsys.readouterr().err[-2000:]
    results = json.loads(capsys.readouterr().out)
    peers = results["peers"]
    assert {p["peer"].split()[0] for p in peers} == {"pgqueuer", "procrastinate"}
    assert all(p["jobs_left"] == 0 and p["jobs_per_s_warm"] > 0 for p in peers)
    assert all(p["single_enqueue_jobs_per_s"] > 0 for p in peers)
    assert {(d["workers"], d["batch"]) for d in results["drain"]} >= {(2, 10), (2, 25)}
    idle = results["idle_statements_per_minute"]
    assert set(idle) == {"pgkick", "pgqueuer", "procrastinate"} and idle["pgkick"] == 0
    versus = [t for t in results["targets"] if "best peer" in t["target"]]
    assert len(versus) == 2 and all("peers not run" not in str(t["measured"]) for t in versus)
    assert [p["repeat"] for p in peers] == [0, 0, 0]  # --quick: one repeat
    # the single enqueues in turns: pgkick, pgbench and each peer through its own API
    turns = results["enqueue"]["single_beside_pgbench"]["peers"]
    assert set(turns) == {"pgqueuer 1.6.0", "procrastinate 3.10.0"}, turns
    assert all(t["jobs_per_s"] > 0 and len(t["pairs"]) == 8 for t in turns.values()), turns
    single = next(t for t in results["targets"] if "peer's single enqueue" in t["target"])
    assert "pgqueuer" in single["measured"] or "procrastinate" in single["measured"], single


def test_bench_quick_dependencies_count_each_job_and_time_each_release(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34.5, run alone: a 10-step chain and a fan-out/fan-in on the local Lambda,
    every job done, and their invocations, sessions and statements per job reported with
    the time from the last parent's finish to the dependant's claim."""
    arguments = ["--items", "dependencies", "--dsn", dsn, "--out", str(tmp_path), "--json"]
    code = cli.main(["bench", "--quick", *arguments])
    assert code == 0, capsys.readouterr().err[-2000:]
    results = json.loads(capsys.readouterr().out)
    chain, across, fan = results["dependencies"]
    assert chain["shape"] == "10-step chain, one queue" and chain["jobs"] == 2 * 10
    assert across["shape"] == "10-step chain, two queues" and across["jobs"] == 2 * 10
    # every step but the first waited on one parent
    assert chain["release_samples"] == across["release_samples"] == 2 * 9
    assert fan["jobs"] == 100 + 2 and fan["all_done"] and fan["release_samples"] == 1  # the join
    for row in (chain, across, fan):
        assert row["all_done"], row
        assert row["invocations"] >= 1 and row["worker_sessions"] >= 1, row
        assert row["counted"] == "statements" and row["statements_per_job"] > 0, row
        assert 0 <= row["release_to_start_p50_ms"] <= row["release_to_start_p99_ms"], row
    assert fan["child_start_after_spawner_p50_ms"] >= 0
    labels = [t["target"] for t in results["targets"]]
    assert any("after its last parent's finish" in label for label in labels), labels
    assert across["invocations"] >= 2  # the other queue kicked (its worker may linger after)
    assert "dependencies, 10-step chain, two queues" in (tmp_path / "bench.md").read_text()
