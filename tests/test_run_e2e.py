"""`evalkit run` end to end: real vLLM CPU engine, tiny model, generated videos (heavy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import engine_env, write_index_video_set

pytestmark = pytest.mark.heavy

N_VIDEOS, PER_VIDEO = 5, 11  # 55 samples


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("e2e")
    build_tiny_model(root / "model", "qwen2_5_vl", seed=0)
    return write_index_video_set(root, N_VIDEOS, PER_VIDEO, lambda v: 48 + 8 * v, "e2e")


def evalkit_run(workdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **engine_env(), "EVALKIT_CACHE": str(workdir / "cache")}
    cmd = [
        sys.executable,
        "-m",
        "evalkit",
        "run",
        "--model",
        str(workdir / "model"),
        "--data",
        str(workdir / "set.jsonl"),
        "--video-root",
        str(workdir / "videos"),
        "--engine",
        "vllm",
        "--dtype",
        "float32",
        "--max-num-batched-tokens",
        "64",
        "--max-num-seqs",
        "8",
        "--max-model-len",
        "2048",
        "--engine-opt",
        "enforce_eager=true",
        "--frames-fps",
        "2",
        "--frames-max-frames",
        "8",
        "--frames-max-pixels",
        str(112 * 84),
        "--frames-min-pixels",
        str(28 * 28 * 4),
        "--max-tokens",
        "8",
        "--runs-dir",
        str(workdir / "runs"),
        "--no-progress",
        *extra,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def test_a_run_records_every_sample_exactly_once_and_resumes_without_repeats(workdir: Path) -> None:
    first = evalkit_run(workdir, "--run-id", "r1")
    assert first.returncode == 0, first.stderr[-3000:]
    results = workdir / "runs" / "r1" / "set.jsonl"
    records = [json.loads(x) for x in results.read_text().splitlines()]
    ids = [r["id"] for r in records]
    assert len(ids) == N_VIDEOS * PER_VIDEO == len(set(ids))
    assert all(r["status"] == "ok" for r in records), [r for r in records if r["status"] != "ok"][
        :2
    ]
    assert all(r["tokens"]["output"] >= 1 and r["score"]["value"] in (0.0, 1.0) for r in records)
    # chunked prefill: each video prompt is longer than one prefill chunk (64 tokens)
    assert min(r["tokens"]["prompt"] for r in records) > 64
    config = json.loads((workdir / "runs" / "r1" / "config.json").read_text())
    assert config["result_config"]["benchmarks"]["set"]["frames"]["max_frames"] == 8

    again = evalkit_run(workdir, "--resume", str(workdir / "runs" / "r1"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "55 resumed" in again.stdout
    assert len(results.read_text().splitlines()) == N_VIDEOS * PER_VIDEO


def test_resuming_with_other_frame_settings_is_refused(workdir: Path) -> None:
    if not (workdir / "runs" / "r1" / "config.json").exists():
        pytest.skip("needs the first run")
    out = evalkit_run(workdir, "--resume", str(workdir / "runs" / "r1"), "--frames-fps", "1")
    assert out.returncode != 0
    assert "fps" in out.stderr and "another configuration" in out.stderr
