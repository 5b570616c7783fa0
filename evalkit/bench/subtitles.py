"""Subtitle files of the benchmarks that ship them, read into timed lines.

Formats: SubRip ``.srt`` (Video-MME, VideoMathQA), LongVideoBench's JSON list
(``{"start", "end", "line"}`` or ``{"timestamp": [s, e], "text"}``) and Video-MME-v2's
word-level JSONL (``{"text", "start_time", "end_time"}``).

The subtitle prompt templates (``multiple_choice_subtitles``,
``multiple_choice_interleaved_subtitles``) read ``sample.fields["subtitles"]``; the frame
times are known only once frames are sampled, so whoever builds the request calls
:func:`with_subtitles` with them just before rendering. The lines kept follow each
benchmark's own protocol (see :func:`select_lines`).
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import DataError
from evalkit.sample import Sample


@dataclass(frozen=True)
class Line:
    """One subtitle line (or word), in seconds."""

    start: float
    end: float
    text: str


_SRT_MARKUP = re.compile(r"</?(?:font|b|i|u)\b[^>]*>", re.IGNORECASE)  # SubRip styling tags
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
                # Video-MME wraps every line in <font ...>; the official prompt uses the text
                body = " ".join(x.strip() for x in rows[i + 1 :] if x.strip())
                body = _SRT_MARKUP.sub("", body).strip()
                out.append(Line(_seconds(*g[:4]), _seconds(*g[4:]), body))
                break
    return out


def _entry(e: dict[str, Any]) -> Line:
    if "timestamp" in e:  # LongVideoBench, one form
        start, end = e["timestamp"]
        return Line(float(start), float(end) if end is not None else float("inf"), str(e["text"]))
    if "start_time" in e:  # Video-MME-v2 word-level
        return Line(float(e["start_time"]), float(e["end_time"]), str(e["text"]))
    # LongVideoBench's other form: "H:MM:SS.sss" strings (its timestamp_to_seconds)
    return Line(_clock(e["start"]), _clock(e["end"]), str(e.get("line", e.get("text", ""))))


def _clock(value: Any) -> float:
    if isinstance(value, str) and ":" in value:
        h, m, s = value.split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)
    return float(value)


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


def at_frames(lines: list[Line], timestamps: Sequence[float]) -> list[Line]:
    """Video-MME's rule: each line on screen at a sampled frame's time, once, in time order.

    A line counts when some frame time t has start <= t < end (lmms-eval's videomme
    utils compare frame indices with each line's frame span the same way).
    """
    ts = sorted(timestamps)
    keep = []
    for x in lines:
        i = bisect_left(ts, x.start)
        if i < len(ts) and ts[i] < x.end:
            keep.append(x)
    return keep


def covering_frames(
    lines: list[Line], timestamps: Sequence[float], offset: float, duration: float
) -> list[Line]:
    """LongVideoBench's rule for interleaving, with times moved to the clip's clock.

    Subtitle times are shifted by ``starting_timestamp_for_subtitles`` (``offset``); a line
    with no end runs to the video's end; a line shorter than one second is widened to one
    second around its middle; a line is kept when a sampled frame falls strictly inside
    it (the authors' longvideobench_dataset.insert_subtitles_into_frames). The lines
    keep their own (shifted, unwidened) times.
    """
    ts = sorted(timestamps)
    keep = []
    for x in lines:
        end = duration if math.isinf(x.end) else x.end
        start, end = x.start - offset, end - offset
        lo, hi = start, end
        if end - start < 1:
            mid = (start + end) / 2
            lo, hi = mid - 0.5, mid + 0.5
        i = bisect_right(ts, lo)
        if i < len(ts) and ts[i] < hi:
            keep.append(Line(start, end, x.text))
    return keep


def joined_words(lines: list[Line]) -> list[Line]:
    """Video-MME-v2's rule: the word-level transcript as one line, words joined by spaces."""
    if not lines:
        return []
    return [Line(lines[0].start, max(x.end for x in lines), " ".join(x.text for x in lines))]


def select_lines(
    lines: list[Line],
    path: str | Path,
    fields: dict[str, Any],
    timestamps: Sequence[float],
    duration: float,
) -> list[Line]:
    """The lines a benchmark's protocol puts in the prompt, told apart by their data.

    Word-level JSONL (Video-MME-v2): the whole transcript. A row with
    ``starting_timestamp_for_subtitles`` (LongVideoBench): :func:`covering_frames`.
    Otherwise (SRT: Video-MME, VideoMathQA): :func:`at_frames`.
    """
    if Path(path).suffix.lower() == ".jsonl":
        return joined_words(lines)
    if "starting_timestamp_for_subtitles" in fields:
        offset = float(fields["starting_timestamp_for_subtitles"] or 0.0)
        return covering_frames(lines, timestamps, offset, duration)
    return at_frames(lines, timestamps)


def with_subtitles(sample: Sample, timestamps: Sequence[float], duration: float) -> Sample:
    """``sample`` with ``fields["subtitles"]`` = [{start, end, text}, ...] in time order.

    ``timestamps`` are the sampled frames' times (seconds, on the video file's clock) and
    ``duration`` the video's length. A sample without ``fields["subtitle_path"]`` (its
    video has no subtitle file) comes back unchanged; the templates then add no
    subtitles, as the official evaluations do.
    """
    path = sample.fields.get("subtitle_path")
    if not path:
        return sample
    lines = select_lines(load_subtitles(path), path, sample.fields, timestamps, duration)
    subtitles = [{"start": x.start, "end": x.end, "text": x.text} for x in lines]
    return sample.model_copy(update={"fields": {**sample.fields, "subtitles": subtitles}})
