"""perf/io_stage.py runs and prints its figures (the measurement itself is in the README)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "perf" / "io_stage.py"


@pytest.mark.timeout(120)
def test_io_stage_quick_prints_every_arm_as_json(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path / "io")],
        capture_output=True,
        text=True,
        timeout=110,
        check=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    for arm in ("threadpool_mmap", "blocking_on_loop", "aiofiles"):
        for temp in ("warm", "cold"):
            assert figures[f"{arm}_{temp}_ms_per_entry"] > 0
            assert figures[f"{arm}_{temp}_loop_p99_lag_ms"] >= 0
    assert figures["aiofiles_over_threadpool_warm_ratio"] > 0
    assert not (tmp_path / "io").exists()  # the entries are removed afterwards
