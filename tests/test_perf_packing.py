"""perf/packing.py --quick runs end to end and prints its JSON figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "packing.py"


@pytest.mark.heavy  # ~60 s on 2 shared cores: both arms twice on the tiny Qwen2.5-VL
@pytest.mark.timeout(600)
def test_quick_run_prints_both_arms_and_equal_logprobs() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(SCRIPT.parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=580,
        check=True,
    )
    figures = json.loads(done.stdout)
    assert figures["packed_tokens"] < figures["padded_tokens"]
    assert figures["max_abs_logprob_diff"] < 1e-5
    for key in ("logprob_speedup_ratio", "update_speedup_ratio", "token_ratio"):
        assert figures[key] > 0
