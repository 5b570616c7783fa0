"""The recipe pieces on the tiny Qwen-VL model: one run with ReMax, a frozen vision tower,
an entropy bonus, a cosine schedule, validation, the overlong filter, a reward function from
a file and a (fake) wandb; then its checkpoint exported to HF format and loaded back."""

from __future__ import annotations

import json
import math
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from evalkit.trainer.config import load_config
from evalkit.trainer.metrics import read_metrics
from evalkit.trainer.recipe import GRPORecipe

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.timeout(600)]

REWARD = """
def by_length(sample, prediction, w_acc=0.9, w_fmt=0.1):
    # a reward with a spread on an untrained model: ReMax's r - r_greedy is rarely all zero
    return {"accuracy": 0.25, "format": 0.0, "overall": (len(prediction) % 5) / 4}
"""


class _FakeRun:
    def __init__(self) -> None:
        self.steps: list[int | None] = []

    def log(self, values: dict[str, Any], step: int | None = None) -> None:
        self.steps.append(step)

    def finish(self) -> None:
        pass


def _data(root: Path) -> tuple[Path, Path]:
    from evalkit.synthvideo import generate, read_rows, to_unified
    from evalkit.tiny_checkpoint import build_tiny_model

    model = build_tiny_model(root / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(root / "sv", 2, split="train", seed=0, families=["moving_shape", "yes_no"])
    rows = [to_unified(r) for r in read_rows(ann)]
    # ~900 prompt tokens against the videos' 120-190: over the limit of 400 below
    rows.append(
        {
            "problem_id": "long",
            "problem": "why " * 800,
            "problem_type": "free-form",
            "solution": "x",
            "data_type": "text",
        }
    )
    data = ann.with_name("train.jsonl")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return model, data


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("recipe_pieces")
    model, data = _data(root)
    (root / "reward.py").write_text(REWARD)
    run = _FakeRun()
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: run  # type: ignore[attr-defined]
    old = sys.modules.get("wandb")
    sys.modules["wandb"] = fake
    cfg = load_config(
        None,
        [
            f"model={model}",
            f"data.train_path={data}",
            f"data.val_path={data}",
            f"data.cache_root={root / 'cache'}",
            "data.video_max_pixels=12544",
            "data.video_max_frames=4",
            "data.max_prompt_tokens=400",
            "rollout.n=3",
            "rollout.max_response_tokens=12",
            "schedule.batch_size=2",
            "schedule.micro_batch_size=4",
            "schedule.steps=2",
            "algorithm.advantage=remax",
            "actor.freeze_vision_tower=true",
            "actor.entropy_coeff=0.01",
            "optimizer.lr=0.001",
            "optimizer.weight_decay=0.0",
            "optimizer.lr_schedule=cosine",
            "optimizer.warmup_steps=1",
            f"rewards.function={root / 'reward.py'}:by_length",
            "trainer.val_before_train=true",
            "trainer.val_freq=2",
            "trainer.loggers=[jsonl, wandb]",
            f"checkpoint.dir={root / 'run' / 'ckpt'}",
        ],
    )
    recipe = GRPORecipe(cfg)
    try:
        recipe.setup(resume=False)
        start = {k: v.detach().clone() for k, v in recipe.actor.model.state_dict().items()}
        history = recipe.run()
    finally:
        recipe.cleanup()
        if old is None:
            sys.modules.pop("wandb", None)
        else:
            sys.modules["wandb"] = old
    return {"root": root, "recipe": recipe, "history": history, "start": start, "wandb": run}


def test_the_overlong_prompt_is_left_out_and_counted(trained: dict[str, Any]) -> None:
    recipe, history = trained["recipe"], trained["history"]
    assert [str(it.sample.id) for it in recipe.data.items if "long" in str(it.sample.id)] == []
    assert len(recipe.data.items) == 4
    assert history[1]["step"] == 1 and history[1]["data/filtered_overlong"] == 1.0


def test_validation_before_training_and_at_val_freq(trained: dict[str, Any]) -> None:
    history = trained["history"]
    assert [h["step"] for h in history] == [0, 1, 2]
    for h in (history[0], history[2]):
        assert h["val/n"] == 4.0 and h["val/filtered_overlong"] == 1.0  # the long row again
        assert h["val/reward/accuracy"] == 0.25
        assert 0.0 <= h["val/reward/overall"] <= 1.0 and h["val/response_length"] > 0
    assert not any(k.startswith("val/") for k in history[1])
    records = read_metrics(trained["recipe"].metrics.path)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert trained["wandb"].steps == [0, 1, 2]


def test_reward_function_schedule_and_entropy_are_used(trained: dict[str, Any]) -> None:
    steps = trained["history"][1:]
    assert all(h["reward/accuracy"] == 0.25 for h in steps)  # the file's reward, not evalkit's
    assert [h["lr"] for h in steps] == [0.0, 0.001]  # warmup 1 step, then the cosine's peak
    assert all(math.isfinite(h["entropy"]) and h["entropy"] > 0 for h in steps)


def test_remax_advantage_is_reward_minus_greedy_reward(trained: dict[str, Any]) -> None:
    last = trained["recipe"].last_update
    adv, overall, baseline = last["advantages"], last["overall"], last["baseline"]
    assert baseline is not None and baseline.shape == overall.shape
    mask = last["response_mask"].bool()
    for i in range(adv.shape[0]):
        values = adv[i][mask[i]]
        assert torch.allclose(values, (overall[i] - baseline[i]).expand_as(values))
        assert bool((adv[i][~mask[i]] == 0).all())
    assert bool((adv != 0).any())


def test_the_vision_tower_stays_frozen_while_the_lm_moves(trained: dict[str, Any]) -> None:
    recipe, start = trained["recipe"], trained["start"]
    after = recipe.actor.model.state_dict()
    vision = [k for k in start if ".visual." in f".{k}"]
    assert vision and all(torch.equal(start[k], after[k]) for k in vision)
    assert not any(p.requires_grad for p in recipe.actor.model.model.visual.parameters())
    moved = [k for k in start if k not in vision and not torch.equal(start[k], after[k])]
    assert moved, "two steps (lr 0, then 1e-3 with an entropy bonus) moved no LM weight"
    opt_params = {id(p) for g in recipe.optimizer.param_groups for p in g["params"]}
    assert not opt_params & {id(p) for p in recipe.actor.model.model.visual.parameters()}


def test_export_reloads_identically_and_evalkit_run_evaluates_it(
    trained: dict[str, Any],
) -> None:
    from transformers import AutoModelForImageTextToText

    from evalkit.cli.main import main as evalkit_main
    from evalkit.engines.family import detect_family
    from evalkit.rundir import RunDir
    from evalkit.trainer.__main__ import main

    out = trained["root"] / "export"
    assert main(["export", str(trained["root"] / "run" / "ckpt"), str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    # transformers 5 keeps the image and video processor configs in processor_config.json
    base = {p.name for p in Path(trained["recipe"].cfg.model).iterdir()} - {"evalkit_tiny.json"}
    assert base | {"trainer_export.json"} == names
    assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json"} <= names
    reloaded = AutoModelForImageTextToText.from_pretrained(out, dtype=torch.float32).eval()
    model = trained["recipe"].actor.model.eval()
    ids = torch.tensor([[5, 17, 99, 230, 7, 11]])
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids=ids).logits, model(input_ids=ids).logits)
    assert detect_family(out).name == detect_family(trained["recipe"].cfg.model).name
    # `evalkit run --model OUT/` on a video row of the training file (an ad-hoc benchmark)
    root = trained["root"]
    args = ["run", "--model", str(out), "--data", str(root / "sv" / "train.jsonl")]
    args += ["--engine", "hf", "--limit", "1", "--max-tokens", "4", "--no-progress"]
    args += ["--cache-root", str(root / "cache"), "--runs-dir", str(root / "runs")]
    assert evalkit_main([*args, "--run-id", "exported"]) == 0
    rundir = RunDir(root / "runs" / "exported")
    statuses = []
    for bench in rundir.benchmarks():  # SynthVideo's rows, and the ad-hoc long text row
        with rundir.store(bench) as store:
            statuses += [r.status for r in store.records()]
    assert statuses and set(statuses) == {"ok"}
