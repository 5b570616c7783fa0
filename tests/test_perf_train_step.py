"""perf/train_step.py --quick runs end to end and prints its JSON figures last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "train_step.py"
RATIOS = (
    "step_speedup_ratio",
    "rollout_speedup_ratio",
    "old_logprob_speedup_ratio",
    "ref_logprob_speedup_ratio",
    "update_speedup_ratio",
    "reward_speedup_ratio",
)


@pytest.mark.heavy  # ~70 s: two tiny-model recipes, then 1 and 2 Ray workers (3 processes)
@pytest.mark.timeout(600)
def test_quick_run_prints_per_phase_seconds_and_ratios(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(SCRIPT.parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=580,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(result[k] > 0 for k in RATIOS)
    phases = {"rollout", "reward", "old_logprob", "ref_logprob", "update", "step"}
    assert set(result["seconds"]) == {"cache", "decode"}
    assert all(phases <= set(arm) for arm in result["seconds"].values())
    # the arms differ only in where frames come from: the training is the same
    assert result["identical_losses"] is True
    assert result["setup"]["videos"] == 2 and result["setup"]["frames_per_video"] == [8, 8]
    # the workers row: the same step on 1 and on 2 Ray FSDP2 workers, phase by phase
    for n in (1, 2):
        for phase in ("step", "rollout", "old_logprob", "update", "sync"):
            assert result[f"workers_{n}_{phase}_s"] > 0
    assert result["workers_2_over_1_ratio"] > 0
    assert result["workers_first_step_loss"] != 0.0
    assert result["workers_first_step_loss_diff"] < 1e-5  # 1 and 2 ranks train the same
