"""perf/cold_start.py --quick: every arm runs for 2 seeds, the JSON carries the headline keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(600)]


def test_quick_cold_start_prints_seeds_and_per_arm_heldout_intervals(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    script = ROOT / "perf" / "cold_start.py"
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["seeds"] == [0, 1]
    for arm in ("pure_online", "mix_gated", "mix_ungated"):
        low = result[f"arm_{arm}_heldout_acc_ci95_low"]
        high = result[f"arm_{arm}_heldout_acc_ci95_high"]
        assert 0.0 <= low <= result[f"arm_{arm}_heldout_acc"] <= high <= 1.0
        steps = result["per_step"][arm]
        assert len(steps["format"]) == len(steps["train_reward"]) == result["steps"] == 2
        assert steps["heldout_steps"] == [0, 2]
    assert Path(result["plot"]).is_file()
    assert result["ci_method"].startswith("two-sided 95% Student t-interval")
