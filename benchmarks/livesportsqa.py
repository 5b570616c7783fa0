"""LiveSports-3K QA adapter: the question's clip window under either of its spellings."""

from __future__ import annotations

from typing import Any

# LiveCC's evaluation reads the clip window as video_start / video_end; exports of the
# QA file (EasyVideoR1 names its cut clips <video_id>_<begin>_<end>.mp4) use begin / end.
_WINDOWS = (("video_start", "video_end"), ("begin", "end"))


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``clip_start`` / ``clip_end`` (seconds) from whichever pair the row has."""
    for start, end in _WINDOWS:
        if r.get(start) is not None and r.get(end) is not None:
            return {**r, "clip_start": float(r[start]), "clip_end": float(r[end])}
    names = " or ".join(f"{a}/{b}" for a, b in _WINDOWS)
    raise ValueError(f"no clip window: the row needs {names}")
