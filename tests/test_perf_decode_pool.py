"""perf/decode_pool.py runs and prints its figures (measured ones are in the session notes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "perf" / "decode_pool.py"


@pytest.mark.timeout(180)
def test_decode_pool_prints_both_arms_as_json() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    for arm in ("spawn", "forkserver"):
        assert figures[f"{arm}_first_s"] > 0 and figures[f"{arm}_next_median_s"] > 0
    assert figures["rounds"] == 2 and figures["next_pool_speedup_ratio"] > 0
    # one line a round on stderr, each arm's rounds in order
    rounds = [line.split(":")[0] for line in out.stderr.splitlines() if " round " in line]
    assert rounds == ["spawn round 0", "spawn round 1", "forkserver round 0", "forkserver round 1"]
