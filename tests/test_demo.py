"""The embedded default (`tox -e demo`) end to end: real vLLM CPU engine, tiny model (heavy)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from tests._engine_env import engine_env

pytestmark = pytest.mark.heavy


def test_the_demo_runs_the_whole_job_and_writes_a_report_with_plots(tmp_path: Path) -> None:
    from PIL import Image

    env = {**os.environ, **engine_env()}
    out = subprocess.run(
        [sys.executable, "-m", "evalkit.demo", "--workdir", str(tmp_path), "--n", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "RANDOMLY INITIALISED" in out.stdout and "chance level" in out.stdout
    html = Path(re.search(r"HTML report: (\S+)", out.stdout).group(1))  # type: ignore[union-attr]
    run_dir = html.parent.parent
    records = [json.loads(x) for x in (run_dir / "SynthVideo.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(r["status"] == "ok" for r in records)  # 1 per family
    page = html.read_text()
    images = re.findall(r"src=['\"]data:image/png;base64,", page)
    linked = re.findall(r"href=['\"]([^'\"]+\.png)['\"]", page)
    assert images and linked
    for rel in linked:
        with Image.open(html.parent / rel) as im:
            im.verify()
    report = json.loads((html.parent / "report.json").read_text())
    assert report["runs"][0]["benchmarks"]["SynthVideo"]["counts"]["scored"] == 8


def test_demo_train_ends_with_an_a_vs_b_report_naming_both_runs(tmp_path: Path) -> None:
    env = {**os.environ, **engine_env()}
    cmd = [sys.executable, "-m", "evalkit.demo", "--workdir", str(tmp_path), "--n", "1"]
    out = subprocess.run(
        [*cmd, "--train", "--train-steps", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    html = Path(re.search(r"HTML report: (\S+)", out.stdout).group(1))  # type: ignore[union-attr]
    report = json.loads((html.parent / "report.json").read_text())
    run_ids = [r["run_id"] for r in report["runs"]]
    assert len(run_ids) == 2
    assert run_ids[0].startswith("before-training") and run_ids[1].startswith("after-training")
    assert [(c["a"], c["b"]) for c in report["comparisons"]] == [tuple(run_ids)]
    deltas = (html.parent / "family_deltas.txt").read_text()
    assert run_ids[0] in deltas and run_ids[1] in deltas
    assert "yes_no" in deltas and "verdict (greedy evaluation" in deltas
    assert "python -m evalkit.trainer.demo" in out.stdout
