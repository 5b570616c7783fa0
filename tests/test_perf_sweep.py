"""perf/sweep.py sets up its videos, model and the 4 settings (``--dry-run``: no engine;
the measurement itself is in the README)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.timeout(170)
def test_perf_sweep_dry_run_plans_four_settings(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "perf" / "sweep.py"), "--dry-run", "--per-family", "1"],
        capture_output=True,
        text=True,
        timeout=160,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures == {"videos": 2, "settings": 4, "dry_run": True}
