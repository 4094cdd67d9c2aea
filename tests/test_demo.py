"""`pgkick demo` end to end on the test database: the scenario and its verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgkick import cli


def test_demo_runs_every_step_and_reports_nothing_lost(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    code = cli.main(
        [
            "demo",
            "--dsn",
            dsn,
            "--jobs",
            "300",
            "--window",
            "1",
            "--no-compare",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert captured.out.startswith("{"), captured.err[-2000:]
    summary = json.loads(captured.out)
    assert code == 0, summary["problems"]
    assert summary["ok"] and summary["problems"] == []
    jobs = 300 + 20 + 3 + 1 + 1  # burst, singles, app transaction, flaky, killed
    assert summary["jobs"] == jobs and summary["by_status"] == {"done": jobs}
    assert summary["attempts"] == {"1": jobs - 2, "2": 2}  # the flaky and the killed job
    assert summary["killed_job"]["attempts"] == 2
    assert summary["killed_job"]["last_error"].startswith("lease expired")
    assert summary["kick_to_start_ms"]["p50"] > 0
    # A lingering worker takes the trickle: one one-off per environment it reaches, then
    # one that lingers, one more per pause past the linger or hand-over (scenario's bound).
    trickle = summary["single_trickle"]
    allowed = trickle["environments"] + 1 + trickle["pauses"] + trickle["hand_overs"]
    assert 1 <= summary["single_invocations"] <= allowed, trickle
    assert trickle["environments"] >= 1
    assert summary["awake"]["suspends"] >= 1  # quiet at the end: the compute slept
    assert Path(summary["picture"]).read_bytes().startswith(b"\x89PNG")
