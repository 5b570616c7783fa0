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


def _dry_run(script: str, tmp_path: Path, *args: str) -> dict[str, object]:
    """``perf/SCRIPT --dry-run ARGS`` as tox runs it (PYTHONSAFEPATH: perf/ is not on
    sys.path by itself); its figures (the last line)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "perf" / script), "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=160,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONSAFEPATH": "1", "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    figures: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


@pytest.mark.timeout(170)
def test_perf_sweep_dry_run_plans_four_settings(tmp_path: Path) -> None:
    figures = _dry_run("sweep.py", tmp_path, "--per-family", "1")
    assert figures == {"videos": 2, "settings": 4, "dry_run": True}


@pytest.mark.timeout(170)
def test_perf_watch_dry_run_writes_its_checkpoints(tmp_path: Path) -> None:
    figures = _dry_run("watch.py", tmp_path)
    assert figures["dry_run"] is True and int(str(figures["checkpoints"])) >= 2
