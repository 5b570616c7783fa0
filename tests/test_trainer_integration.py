"""End to end on CPU: the tiny Qwen-VL model trained on SynthVideo VIDEO samples."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch

from evalkit.trainer.checkpoint import list_checkpoints
from evalkit.trainer.config import load_config
from evalkit.trainer.metrics import read_metrics
from evalkit.trainer.recipe import GRPORecipe

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def setup_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from evalkit.synthvideo import generate, read_rows, to_unified
    from evalkit.tiny_checkpoint import build_tiny_model

    root = tmp_path_factory.mktemp("trainer_int")
    model = build_tiny_model(root / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(root / "sv", 2, split="train", seed=0, families=["moving_shape", "yes_no"])
    rows = [to_unified(r) for r in read_rows(ann)]
    for row in rows:  # offline trajectories for the mix-policy runs
        # the bare answer fits rollout.max_response_tokens=12 (a longer trajectory would be
        # truncated, and a truncated one is scored as such: no accuracy, no reward spread)
        row["offline_output"] = row["solution"]
    data = ann.with_name("train.jsonl")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"root": root, "model": model, "data": data}


def _overrides(d: dict[str, Path], run: str, *extra: str) -> list[str]:
    return [
        f"model={d['model']}",
        f"data.train_path={d['data']}",
        f"data.cache_root={d['root'] / 'cache'}",
        "data.video_max_pixels=12544",
        "data.video_max_frames=4",
        "rollout.n=3",
        "rollout.max_response_tokens=12",
        "schedule.batch_size=2",
        "schedule.micro_batch_size=4",
        "optimizer.lr=0.001",
        f"checkpoint.dir={d['root'] / run / 'ckpt'}",
        *extra,
    ]


def _params(recipe: GRPORecipe) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in recipe.actor.state_dict().items()}


def test_cli_trains_a_few_video_steps(setup_dir: dict[str, Path]) -> None:
    from evalkit.trainer.__main__ import main

    run = setup_dir["root"] / "cli"
    # no weight decay: a parameter may only move through a policy gradient; mix-policy's
    # offline slot guarantees groups with a reward spread, hence a nonzero gradient
    args = _overrides(
        setup_dir,
        "cli",
        "schedule.steps=3",
        "checkpoint.every=2",
        "optimizer.weight_decay=0.0",
        "mix_policy.enable_mix_policy=true",
    )
    before = GRPORecipe(load_config(None, args))
    before.setup(resume=False)
    start = _params(before)
    before.cleanup()
    shutil.rmtree(run, ignore_errors=True)
    assert main(["train", "--config", str(_config_file(run)), *args]) == 0
    records = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(math.isfinite(r["loss"]) for r in records)
    assert all(r["groups"] == 2 and r["response_length"] > 0 for r in records)
    assert any(r["grad_norm"] > 0 for r in records)
    assert {"reward/accuracy", "reward/format", "grad_norm", "clipfrac_high", "time_s"} <= set(
        records[0]
    )
    assert [p.name for p in list_checkpoints(run / "ckpt")] == ["step_00000002", "step_00000003"]
    after = torch.load(run / "ckpt" / "step_00000003" / "model.pt", weights_only=True)
    changed = [k for k, v in start.items() if not torch.equal(v, after[k])]
    assert changed, "three optimizer steps left every parameter unchanged"


def _config_file(run: Path) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    path = run / "config.yaml"
    path.write_text("seed: 0\nrollout:\n  temperature: 1.0\n")
    return path


def _run(d: dict[str, Path], name: str, steps: int, resume: bool, *extra: str) -> list[dict]:
    recipe = GRPORecipe(load_config(None, _overrides(d, name, f"schedule.steps={steps}", *extra)))
    recipe.setup(resume=resume)
    try:
        return recipe.run()
    finally:
        recipe.cleanup()


def test_resume_continues_identically_with_mix_policy(setup_dir: dict[str, Path]) -> None:
    mix = (
        "mix_policy.enable_mix_policy=true",
        "checkpoint.every=2",
        "optimizer.lr_schedule=cosine",  # the schedule's position is resumed too
        "optimizer.warmup_steps=1",
    )
    full = _run(setup_dir, "full", 4, False, *mix)
    assert sum(h["offline_slots"] for h in full) > 0
    # a second run resumes from the full run's step-2 checkpoint only
    src = setup_dir["root"] / "full" / "ckpt" / "step_00000002"
    shutil.copytree(src, setup_dir["root"] / "resumed" / "ckpt" / src.name)
    resumed = _run(setup_dir, "resumed", 4, True, *mix)
    assert [h["step"] for h in resumed] == [3, 4]
    keys = ("loss", "reward/overall", "online/accuracy", "response_length", "grad_norm", "lr")
    for a, b in zip(full[2:], resumed, strict=True):
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}


def test_dapo_dynamic_sampling_and_kl_run_on_video(setup_dir: dict[str, Path]) -> None:
    history = _run(
        setup_dir,
        "dapo",
        2,
        False,
        "algorithm.dynamic_sampling.enable=true",
        "algorithm.dynamic_sampling.max_tries=2",
        "algorithm.clip_eps_high=0.28",
        "algorithm.kl.estimator=k3",
        "algorithm.kl.coef=0.01",
        "rewards.overlong.enable=true",
        "rewards.overlong.buffer=4",
        "mix_policy.enable_mix_policy=true",  # the offline slot gives every group a signal
    )
    assert [h["step"] for h in history] == [1, 2]
    for h in history:
        assert 1 <= h["dynamic_sampling/tries"] <= 2
        assert h["dynamic_sampling/kept"] == 2 and "reward/overlong" in h
        assert math.isfinite(h["loss"]) and h["kl"] >= 0.0


def test_ppo_mini_batches_epochs_and_replace_last_run_on_video(setup_dir: dict[str, Path]) -> None:
    history = _run(
        setup_dir,
        "ppo",
        1,
        False,
        "schedule.ppo_mini_batch_size=1",
        "schedule.ppo_epochs=2",
        "mix_policy.enable_mix_policy=true",
        "mix_policy.mode=replace_last",
    )
    (h,) = history
    assert h["ppo/updates"] == 4.0  # 2 groups of 3 -> 2 mini-batches, 2 epochs
    assert h["offline_slots"] == 2.0  # no gate: every group's 3rd response replaced
    assert math.isfinite(h["loss"]) and h["grad_norm"] > 0
    assert h["ppo/last_ratio_abs_dev"] > 0  # old log-probs fixed while the weights moved
