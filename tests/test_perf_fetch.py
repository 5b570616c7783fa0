"""perf/fetch.py measures both arms against the hub stand-in and prints its figures (a
small release here; the measurement itself is in the README)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.timeout(300)
def test_perf_fetch_runs_both_arms_and_prints_its_ratios(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "perf" / "fetch.py"),
            *("--archives", "2", "--archive-s", "0.2", "--archive-kb", "100"),
            *("--request-s", "0.01"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["samples"] == 8 and figures["archives"] == 2
    for key in ("first_sample_ratio", "total_wall_ratio", "total_over_bound"):
        assert figures[key] > 0
