"""STVG adapter: the tube target out of ``<answer>{"time": .., "boxes": ..}</answer>``."""

from __future__ import annotations

import json
import re
from typing import Any

_WRAP = re.compile(r"<(answer|think)>(.*?)</\1>", re.S)


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``tube`` = ``{"time": [s, e], "boxes": {key: box}}`` parsed from ``solution``."""
    raw = str(r["solution"])
    m = _WRAP.search(raw)
    tube = json.loads(m.group(2) if m else raw)
    if not isinstance(tube, dict) or "time" not in tube:
        raise ValueError("solution holds no {'time': [s, e], 'boxes': {...}} object")
    return {**r, "tube": tube}
