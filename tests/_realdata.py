"""Where the shared real annotation rows live: ``../shared/realdata/easyvideor1`` beside the
checkout, or ``$EVALKIT_REALDATA/easyvideor1``. They are read in place, never copied into
the project; tests that use them are marked ``realdata`` and skip where they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _realdata() -> Path:
    env = os.environ.get("EVALKIT_REALDATA")
    base = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
    return base / "easyvideor1"


REAL = _realdata()
"""The folder of real EasyVideoR1 annotation files (may not exist)."""
REAL_FILES = sorted(REAL.glob("*.json*")) if REAL.is_dir() else []


def real_file(name: str) -> Path:
    """The real file ``name``, or a skip naming where it was looked for."""
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"real data absent: {path}")
    return path
