"""The awake timeline as a chart: one band per mode (awake or suspended), its jobs beneath.

Why matplotlib: a reader needs a time axis in seconds, a legend and the awake
fraction of each mode, which a hand-drawn bitmap font could not give legibly.
The tooling carries it (pgkick-dev); the runtime never does. Drawn with the Agg
backend: no display, no GUI toolkit.

Why each lane carries its own awake fraction: the modes' runs last different
times, and a label computed against the picture's width (the longest run) once
said 31% where the demo's table, from the same run, said 70% (issue #27). A lane
shows the figure the monitor reported for it (`fraction`), or its timeline over
its own length; never the width of the picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

AWAKE = "#2e9d5a"
SUSPENDED = "#d7d7d7"
JOB = "#285ac8"


@dataclass
class Lane:
    """One row: a label, (seconds, awake) samples each closing an interval, job times."""

    label: str
    timeline: Sequence[tuple[float, bool]]
    jobs: Sequence[float] = ()
    fraction: float | None = None  # the monitor's awake fraction: what the table prints

    def intervals(self, duration: float) -> list[tuple[float, float, bool]]:
        """(start, width, awake) spans covering [0, duration]."""
        spans, previous = [], 0.0
        for seconds, awake in self.timeline:
            end = min(seconds, duration)
            if end > previous:
                spans.append((previous, end - previous, awake))
            previous = max(previous, end)
        return spans

    def awake_fraction(self) -> float:
        """The monitor's figure when given, else awake time over this lane's own length."""
        if self.fraction is not None:
            return self.fraction
        own = self.timeline[-1][0] if self.timeline else 0.0
        spans = self.intervals(own)
        return sum(width for _, width, awake in spans if awake) / own if own else 0.0


def label(lane: Lane) -> str:
    """The lane's name and awake share, as the chart prints it beside the band."""
    return f"{lane.label}\nawake {lane.awake_fraction():.0%}"


def render(path: Path, lanes: Sequence[Lane], duration: float, width: float = 10.0) -> Path:
    """Write a PNG: per lane a band (green awake, grey suspended) and job ticks beneath."""
    figure, axes = plt.subplots(figsize=(width, 1.0 + 0.8 * len(lanes)), dpi=100)
    try:
        labels = []
        for row, lane in enumerate(reversed(lanes)):
            base = row * 1.0
            spans = lane.intervals(duration)
            for colour, awake in ((AWAKE, True), (SUSPENDED, False)):
                bars = [(start, span) for start, span, state in spans if state is awake]
                axes.broken_barh(bars, (base + 0.35, 0.5), facecolors=colour)
            if lane.jobs:
                axes.vlines(list(lane.jobs), base + 0.05, base + 0.3, colors=JOB, linewidth=0.8)
            labels.append(label(lane))
        axes.set_yticks([row + 0.5 for row in range(len(lanes))], labels)
        axes.set_ylim(0, len(lanes))
        axes.set_xlim(0, duration)
        axes.set_xlabel("time (s)")
        axes.legend(
            handles=[
                Patch(color=AWAKE, label="awake"),
                Patch(color=SUSPENDED, label="suspended"),
                Patch(color=JOB, label="job done"),
            ],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.35 if len(lanes) < 3 else -0.15),
            ncols=3,
            frameon=False,
        )
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path
