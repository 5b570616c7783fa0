"""VideoReasonBench adapter: skill, level, demo and the breakdown groups of show_results.py."""

from __future__ import annotations

from typing import Any

# utils/show_results.py merges order_state and counting_state into infer_state.
SKILLS = {
    "order_operation": ("order_operation", "recall"),
    "counting_operation": ("counting_operation", "recall"),
    "order_state": ("infer_state", "infer"),
    "counting_state": ("infer_state", "infer"),
    "comparison_state": ("comparison_state", "infer"),
    "prediction_state": ("prediction_state", "predict"),
    "prediction_operation": ("prediction_operation", "predict"),
}
# show_results.py's state_size_map: 3 or 1 states -> size 1, 4 or 2 states -> size 2.
STATE_SIZE = {1: "1", 3: "1", 2: "2", 4: "2"}


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``demo``, ``skill``, ``level``, ``state_size``, ``num_operation_group`` and
    ``needs_simulation`` (no reference answer: rated by replaying the operations)."""
    dim = str(r["dim"])
    if dim not in SKILLS:
        raise ValueError(f"unknown dim {dim!r} (known: {', '.join(SKILLS)})")
    skill, level = SKILLS[dim]
    parts = str(r["video"]).split("/")
    n_ops = int(r["num_operation"])
    return {
        **r,
        "demo": parts[-2] if len(parts) >= 2 else "",
        "skill": skill,
        "level": level,
        "state_size": STATE_SIZE.get(int(r["num_state"]), str(r["num_state"])),
        "num_operation_group": "5-9" if n_ops < 10 else "10-14",
        "needs_simulation": not str(r.get("answer") or "").strip(),
    }
