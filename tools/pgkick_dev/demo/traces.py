"""Reading the demo workers' traces: which execution of which job ran where, and when.

Apart from the task that writes them (pgkick_dev.demo.tasks) so that the demo's
verdict and the chaos tests can read traces without registering the demo task
in their own process.
"""

from __future__ import annotations

import itertools
from pathlib import Path


def read_traces(folder: Path) -> list[tuple[str, int, int, int, float]]:
    """Every (kind, job_id, attempt, pid, unix time) line the workers wrote."""
    lines = []
    for path in folder.glob("*.trace"):
        for line in path.read_text().splitlines():
            kind, job_id, attempt, pid, at = line.split()
            lines.append((kind, int(job_id), int(attempt), int(pid), float(at)))
    return lines


def overlapping_runs(traces: list[tuple[str, int, int, int, float]]) -> list[int]:
    """Jobs two executions of which overlapped in time (a finished one inside another)."""
    runs: dict[tuple[int, int, int], dict[str, float]] = {}
    for kind, job_id, attempt, pid, at in traces:
        runs.setdefault((job_id, attempt, pid), {})[kind] = at
    by_job: dict[int, list[tuple[float, float]]] = {}
    for (job_id, _, _), times in runs.items():
        if "start" in times:
            by_job.setdefault(job_id, []).append((times["start"], times.get("end", float("inf"))))
    bad = []
    for job_id, spans in by_job.items():
        spans.sort()
        if any(
            later[0] < earlier[1] and earlier[1] != float("inf")
            for earlier, later in itertools.pairwise(spans)
        ):
            bad.append(job_id)
    return sorted(bad)
