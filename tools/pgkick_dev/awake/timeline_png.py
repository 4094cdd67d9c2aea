"""A timeline picture of awake versus suspended, with job activity, as a PNG.

Why hand-rolled: a few coloured bands and labels need no plotting library, and
pgkick keeps its dependencies to what a Lambda package should carry. PNG is
zlib-compressed RGB rows; labels use a 3x5 pixel font drawn at scale 2.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

AWAKE = (46, 157, 90)
SUSPENDED = (215, 215, 215)
JOB = (40, 90, 200)
INK = (30, 30, 30)
PAPER = (255, 255, 255)

# 3x5 glyphs, one row of 3 bits per digit (top to bottom).
FONT = {
    "A": "25755",
    "B": "65656",
    "C": "34443",
    "D": "65556",
    "E": "74647",
    "F": "74644",
    "G": "34553",
    "H": "55755",
    "I": "72227",
    "J": "11153",
    "K": "55655",
    "L": "44447",
    "M": "57755",
    "N": "65555",
    "O": "25552",
    "P": "65644",
    "Q": "25573",
    "R": "65655",
    "S": "34716",
    "T": "72222",
    "U": "55557",
    "V": "55552",
    "W": "55775",
    "X": "55255",
    "Y": "55222",
    "Z": "71247",
    "0": "75557",
    "1": "26222",
    "2": "61247",
    "3": "61216",
    "4": "55711",
    "5": "74616",
    "6": "34757",
    "7": "71222",
    "8": "75757",
    "9": "75711",
    " ": "00000",
    "%": "51245",
    "-": "00700",
    ".": "00002",
    ":": "02020",
    "/": "11244",
}


@dataclass
class Lane:
    """One row of the picture: a label, (seconds, awake) samples, and job times in seconds."""

    label: str
    timeline: Sequence[tuple[float, bool]]
    jobs: Sequence[float] = ()


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.rows = [bytearray(PAPER * width) for _ in range(height)]

    def fill(self, x0: int, y0: int, x1: int, y1: int, colour: tuple[int, int, int]) -> None:
        for y in range(max(0, y0), min(self.height, y1)):
            row = self.rows[y]
            for x in range(max(0, x0), min(self.width, x1)):
                row[3 * x : 3 * x + 3] = bytes(colour)

    def text(self, x: int, y: int, text: str, scale: int = 2) -> None:
        for char in text.upper():
            for line, digit in enumerate(FONT.get(char, FONT[" "])):
                bits = int(digit)
                for col in range(3):
                    if bits & (4 >> col):
                        self.fill(
                            x + col * scale,
                            y + line * scale,
                            x + (col + 1) * scale,
                            y + (line + 1) * scale,
                            INK,
                        )
            x += 4 * scale

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(row) for row in self.rows)

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def render(path: Path, lanes: Sequence[Lane], duration: float, width: int = 900) -> Path:
    """Draw each lane as a band (green awake, grey suspended) with job ticks beneath it."""
    left, lane_height = 170, 46
    canvas = Canvas(width, 20 + lane_height * len(lanes) + 24)
    span = width - left - 10
    for index, lane in enumerate(lanes):
        top = 14 + index * lane_height
        canvas.text(8, top + 8, lane.label[:20])
        previous = 0.0
        for seconds, awake in lane.timeline:
            x0 = left + int(span * previous / duration)
            x1 = left + int(span * min(seconds, duration) / duration) + 1
            canvas.fill(x0, top, x1, top + 24, AWAKE if awake else SUSPENDED)
            previous = min(seconds, duration)
        for seconds in lane.jobs:
            x = left + int(span * min(seconds, duration) / duration)
            canvas.fill(x, top + 28, x + 2, top + 38, JOB)
    bottom = 20 + lane_height * len(lanes)
    canvas.text(left, bottom, f"0 S - {duration:.0f} S   GREEN AWAKE  GREY SUSPENDED  BLUE JOBS")
    path.write_bytes(canvas.png())
    return path
