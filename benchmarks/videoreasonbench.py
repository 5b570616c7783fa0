"""VideoReasonBench adapter: the skill's level (recall / infer / predict) and demo type."""

from __future__ import annotations

from typing import Any

# Paper Sec. 2: three levels of skills, two skills each.
LEVELS = {
    "Recall Order": "recall",
    "Recall Count": "recall",
    "Infer State": "infer",
    "Compare State": "infer",
    "Predict State": "predict",
    "Predict Operation": "predict",
}


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``level`` (from ``skill``) and ``demo`` (the video's folder)."""
    skill = str(r["skill"])
    if skill not in LEVELS:
        raise ValueError(f"unknown skill {skill!r} (known: {', '.join(LEVELS)})")
    video = str(r["video"])
    return {**r, "level": LEVELS[skill], "demo": video.split("/", 1)[0] if "/" in video else ""}
