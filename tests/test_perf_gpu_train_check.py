"""perf/gpu_train_check.sh / .py's dry run: the device check's training, FSDP2 and sync code run
on CPU (gloo, tiny model, shared-memory buckets into a second model copy), so it does not rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_dry_run_trains_syncs_and_matches_greedy_tokens(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path)}
    env["OMP_NUM_THREADS"] = "1"
    # through the wrapper script (its --steps 5 is overridden by the later --steps 2)
    argv = ["bash", "perf/gpu_train_check.sh", "--dry-run", "--steps", "2"]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ok"] and res["greedy_match"] and res["stale_differs"] and res["fsdp"]
    assert [s["step"] for s in res["steps"]] == [1, 2]
    assert all(s["buckets"] > 1 for s in res["steps"])
    assert res["steps"][1]["loss"] < res["steps"][0]["loss"]


def test_without_a_gpu_the_real_check_refuses_cleanly() -> None:
    import importlib.util

    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    spec = importlib.util.spec_from_file_location(
        "gpu_train_check", ROOT / "perf/gpu_train_check.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([]) == 2


def _recipe_check():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_recipe_check", ROOT / "perf/_recipe_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_8b_recipe_at_toy_scale_keeps_its_recipe_on_one_gpu(tmp_path) -> None:
    from evalkit.trainer.config import find_config, load_config

    check = _recipe_check()
    path = find_config("dapo_qwen3vl_8b")
    assert check.tiny_family(load_config(path).model) == "qwen3_vl"
    cfg = load_config(path, check.tiny_overrides(tmp_path, "qwen3_vl", 2, 1, dry_run=False))
    plan = check.plan_summary(cfg)  # resolved without a GPU
    assert (plan["ranks"], plan["backend"], plan["engine_hosts"]) == (1, "nccl", [0])
    args = plan["engine_args"]
    assert not args["enable_chunked_prefill"] and args["limit_mm_per_prompt"]["image"] == 5
    actor = cfg.actor
    assert actor.padding_free and actor.use_dynamic_bsz and actor.gradient_checkpointing
    assert (cfg.algorithm.clip_eps_high, cfg.distributed.init, cfg.data.min_pixels) == (
        0.28,
        "rank0",
        3136,
    )


@pytest.mark.heavy
def test_recipe_config_dry_run_trains_two_steps_on_cpu() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env.setdefault("RAY_AUTH_MODE", "disabled")
    argv = [sys.executable, "perf/gpu_train_check.py", "--config", "dapo_qwen3vl_8b", "--tiny",
            "--steps", "2", "--dry-run"]  # fmt: skip
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ok"] and [s["step"] for s in res["steps"]] == [1, 2]
    assert res["family"] == "qwen3_vl" and res["plan"]["backend"] == "gloo"
