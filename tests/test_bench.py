"""`pgkick bench --quick` end to end on tiny sizes, so the benchmark cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgkick import cli


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
    assert results["ceiling"]["jobs_per_s"] > 0
    assert all(row["exactly_once"] for row in results["drain"])
    assert results["enqueue"]["many"]["jobs_per_s"] > 0
    assert results["kick_to_start_ms"]["samples"] > 0
    assert results["scale"]["ratio"] > 0
    modes = {m["mode"]: m for m in results["awake"]["modes"]}
    assert set(modes) == {"pgkick", "poll", "listen"}
    assert len(results["targets"]) == 8 and all(
        isinstance(t["met"], bool) for t in results["targets"]
    )
    assert (tmp_path / "bench.md").read_text().startswith("| target | measured | met |")
