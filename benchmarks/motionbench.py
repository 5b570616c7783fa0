"""MotionBench adapter: only questions with a released answer (the DEV set) are scored."""

from __future__ import annotations

from typing import Any


def dev_only(r: dict[str, Any]) -> dict[str, Any] | None:
    """Skip TEST questions: their answer is withheld as "NA" (scored by the leaderboard)."""
    return None if str(r.get("answer", "")).strip().upper() == "NA" else r
