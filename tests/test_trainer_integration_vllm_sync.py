"""vLLM rollout engine: after a weight sync it samples from the actor's CURRENT weights."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from evalkit.engines.base import Request, SamplingParams
from tests._engine_env import TINY_VLLM_OPTIONS, apply_engine_env

pytestmark = pytest.mark.heavy  # starts a vLLM engine on CPU (~15-60 s)

OPTIONS = TINY_VLLM_OPTIONS


@pytest.fixture(scope="module")
def env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)
        yield


def _greedy(engine: object, loop: object, prompt: str) -> list[int]:
    from evalkit.trainer.rollout import sample_responses

    req = Request(id="p", text=prompt)
    (group,) = sample_responses(
        engine,  # type: ignore[arg-type]
        [req],
        [1],
        SamplingParams(max_tokens=10, temperature=0.0),
        0,
        loop,  # type: ignore[arg-type]
    )
    return group[0].token_ids


def test_synced_vllm_engine_matches_the_updated_actor(env: None, tmp_path: Path) -> None:
    from evalkit.models.tiny import build_tiny_model
    from evalkit.trainer.actor import ActorPolicy
    from evalkit.trainer.rollout import (
        EngineLoop,
        SharedHFEngine,
        make_rollout_engine,
        sync_weights,
    )

    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    actor = ActorPolicy.from_pretrained(model)
    loop = EngineLoop()
    vllm = make_rollout_engine("vllm", str(model), actor, OPTIONS, loop)
    hf = SharedHFEngine(actor.model, actor.processor, actor.family)
    try:
        prompt = "Describe the red ball."
        before = _greedy(vllm, loop, prompt)
        assert before == _greedy(hf, loop, prompt)
        with torch.no_grad():  # a large change of the weights, as many steps would make
            gen = torch.Generator().manual_seed(1)
            for p in actor.model.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
        updated = _greedy(hf, loop, prompt)
        assert updated != before
        assert _greedy(vllm, loop, prompt) == before  # not synced yet: the old weights
        sync_weights(vllm, actor, loop)
        assert _greedy(vllm, loop, prompt) == updated
    finally:
        loop.run(vllm.close())
        loop.run(hf.close())
        loop.close()


def test_recipe_trains_on_video_with_vllm_rollouts(env: None, tmp_path: Path) -> None:
    import json
    import math

    from evalkit.models.tiny import build_tiny_model
    from evalkit.synthvideo import generate, read_rows, to_unified
    from evalkit.trainer.config import load_config
    from evalkit.trainer.recipe import GRPORecipe

    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(tmp_path / "sv", 1, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = ann.with_name("train.jsonl")
    data.write_text("".join(json.dumps(to_unified(r)) + "\n" for r in read_rows(ann)))
    options = "{" + ", ".join(f"{k}: {str(v).lower()}" for k, v in OPTIONS.items()) + "}"
    cfg = load_config(
        None,
        [
            f"model={model}",
            f"data.train_path={data}",
            f"data.cache_root={tmp_path / 'cache'}",
            "data.video_max_pixels=12544",
            "data.video_max_frames=4",
            "rollout.engine=vllm",
            f"rollout.engine_options={options}",
            "rollout.n=3",
            "rollout.max_response_tokens=12",
            "schedule.steps=2",
            "schedule.batch_size=2",
            "optimizer.lr=0.001",
            f"checkpoint.dir={tmp_path / 'run' / 'ckpt'}",
        ],
    )
    recipe = GRPORecipe(cfg)
    recipe.setup(resume=False)
    try:
        history = recipe.run()
    finally:
        recipe.cleanup()
    assert [h["step"] for h in history] == [1, 2]
    assert all(math.isfinite(h["loss"]) and h["groups"] == 2 for h in history)
