"""VSI-Bench adapter: numeric questions carry ``options: null``; give them no options."""

from __future__ import annotations

from typing import Any


def row(r: dict[str, Any]) -> dict[str, Any]:
    """``options`` None (numeric-answer question types) -> ``[]``."""
    return r if r.get("options") is not None else {**r, "options": []}
