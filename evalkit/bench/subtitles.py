"""Subtitle files of the benchmarks that ship them, read into timed lines.

Formats: SubRip ``.srt`` (Video-MME, VideoMathQA), LongVideoBench's JSON list
(``{"start", "end", "line"}`` or ``{"timestamp": [s, e], "text"}``) and Video-MME-v2's
word-level JSONL (``{"text", "start_time", "end_time"}``). Prompt templates pick the
lines that go with the sampled frames through :func:`lines_between` / :func:`for_frames`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import DataError


@dataclass(frozen=True)
class Line:
    """One subtitle line (or word), in seconds."""

    start: float
    end: float
    text: str


_SRT_TIME = re.compile(r"(\d+):(\d+):(\d+)[,.](\d+)\s*-->\s*(\d+):(\d+):(\d+)[,.](\d+)")


def _seconds(h: str, m: str, s: str, ms: str) -> float:
    return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 10 ** len(ms)


def _srt(text: str) -> list[Line]:
    out = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip()):
        rows = block.split("\n")
        for i, row in enumerate(rows):
            m = _SRT_TIME.search(row)
            if m:
                g = m.groups()
                body = " ".join(x.strip() for x in rows[i + 1 :] if x.strip())
                out.append(Line(_seconds(*g[:4]), _seconds(*g[4:]), body))
                break
    return out


def _entry(e: dict[str, Any]) -> Line:
    if "timestamp" in e:  # LongVideoBench, one form
        start, end = e["timestamp"]
        return Line(float(start), float(end) if end is not None else float("inf"), str(e["text"]))
    if "start_time" in e:  # Video-MME-v2 word-level
        return Line(float(e["start_time"]), float(e["end_time"]), str(e["text"]))
    return Line(float(e["start"]), float(e["end"]), str(e.get("line", e.get("text", ""))))


def load_subtitles(path: str | Path) -> list[Line]:
    """Timed lines of a subtitle file, sorted by start (DataError names the file)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix.lower() == ".srt":
            lines = _srt(text)
        elif path.suffix.lower() == ".jsonl":
            lines = [_entry(json.loads(x)) for x in text.splitlines() if x.strip()]
        else:
            lines = [_entry(e) for e in json.loads(text)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: cannot read subtitles: {exc}") from exc
    return sorted(lines, key=lambda x: (x.start, x.end))


def lines_between(lines: list[Line], start: float, end: float) -> list[Line]:
    """Lines overlapping [start, end) seconds."""
    return [x for x in lines if x.end >= start and x.start < end]


def for_frames(lines: list[Line], timestamps: list[float], duration: float) -> list[list[Line]]:
    """For each sampled frame, the lines spoken until the next frame (interleaving)."""
    bounds = [*timestamps[1:], duration]
    return [lines_between(lines, t, b) for t, b in zip(timestamps, bounds, strict=True)]
