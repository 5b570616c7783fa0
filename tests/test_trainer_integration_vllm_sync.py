"""vLLM rollout engine: after an in-memory weight sync it samples from the actor's CURRENT
weights (no file written); vLLM sleep mode on CPU."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evalkit.engines.base import Request, SamplingParams
from tests._engine_env import TINY_VLLM_OPTIONS, apply_engine_env, make_frames

pytestmark = pytest.mark.heavy  # starts a vLLM engine on CPU (~15-60 s)

OPTIONS = TINY_VLLM_OPTIONS


@pytest.fixture(scope="module")
def env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)
        yield


def _greedy(engine: Any, loop: Any, request: Request) -> list[int]:
    from evalkit.trainer.rollout import sample_responses

    (group,) = sample_responses(
        engine,
        [request],
        [1],
        SamplingParams(max_tokens=10, temperature=0.0),
        0,
        loop,
    )
    return group[0].token_ids


@torch.no_grad()
def _actor_greedy(actor: Any, request: Request) -> list[int]:
    """HF generate on the actor's module (no token suppressed, as vLLM suppresses none)."""
    from evalkit.trainer.visual_inputs import processor_inputs

    inputs = processor_inputs(actor.processor, actor.family, request)
    out = actor.model.generate(**inputs, max_new_tokens=10, do_sample=False)
    return [int(t) for t in out[0, inputs["input_ids"].shape[1] :]]


def _files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


def _update(actor: Any, request: Request, steps: int = 3) -> None:
    """A few AdamW steps that push the last prompt position towards one token."""
    enc = actor.encode(request)
    ids = torch.tensor([enc.prompt_ids])
    opt = torch.optim.AdamW(actor.model.parameters(), lr=0.05)
    actor.model.train()
    for _ in range(steps):
        logits = actor.forward(ids)
        loss = -torch.log_softmax(logits[0, -1], -1)[42]
        opt.zero_grad()
        loss.backward()
        opt.step()
    actor.model.eval()


@pytest.mark.timeout(900)
def test_synced_vllm_engine_matches_the_updated_actor(
    env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an optimizer update and an in-memory sync (many small buckets) vLLM's greedy
    tokens for a video prompt equal HF generate's on the actor, and no file was written."""
    import tempfile

    import safetensors.torch

    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.actor import ActorPolicy
    from evalkit.trainer.rollout import (
        EngineLoop,
        make_rollout_engine,
        sleep_engine,
        sync_weights,
    )

    # short: vLLM's zmq sockets live under it (a unix socket path holds 107 bytes; pytest's
    # folder under xdist, /tmp/pytest-of-root/pytest-N/popen-gwN/test_.../, is too long)
    scratch = Path(tempfile.mkdtemp(prefix="ek-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(scratch))  # the engine processes inherit it
    monkeypatch.setattr(tempfile, "tempdir", None)
    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    actor = ActorPolicy.from_pretrained(model)
    loop = EngineLoop()
    vllm = make_rollout_engine("vllm", str(model), actor, OPTIONS, loop, sleep_level=1)
    try:
        video = make_frames(4, 56, 84, seed=3)  # T/2 <= H/28: HF and vLLM M-RoPE agree
        req = Request(id="p", text="Describe the red ball.", videos=[video])
        before = _greedy(vllm, loop, req)
        assert before == _actor_greedy(actor, req)
        _update(actor, Request(id="u", text=req.text))  # text only: no visual inputs needed
        updated = _actor_greedy(actor, req)
        assert updated != before  # the update changed the policy's answer
        assert _greedy(vllm, loop, req) == before  # not synced yet: the old weights
        assert sleep_engine(vllm, loop, 1) is False  # CPU: no sleep mode, logged no-op

        def no_files(*a: Any, **k: Any) -> Any:
            raise AssertionError("weight sync wrote a file")

        seen = _files(scratch)
        with monkeypatch.context() as mp:
            mp.setattr(safetensors.torch, "save_file", no_files)
            mp.setattr(tempfile, "TemporaryDirectory", no_files)
            mp.setattr(tempfile, "mkstemp", no_files)
            stats = sync_weights(vllm, actor, loop, bucket_mb=0.25)
        assert _files(scratch) == seen
        assert stats is not None and stats.buckets > 1
        assert stats.tensors == len(actor.model.state_dict())  # untied: every tensor
        assert _greedy(vllm, loop, req) == updated
    finally:
        loop.run(vllm.close())
        loop.close()
        shutil.rmtree(scratch, ignore_errors=True)


def test_recipe_trains_on_video_with_vllm_rollouts(env: None, tmp_path: Path) -> None:
    import math

    from evalkit.synthvideo import generate, write_unified
    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.config import load_config
    from evalkit.trainer.recipe import GRPORecipe

    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(tmp_path / "sv", 1, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = write_unified(ann)
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


def test_vllm_refuses_sleep_mode_on_cpu(env: None, tmp_path: Path) -> None:
    """The fact the trainer's CPU no-op rests on: ModelConfig raises for enable_sleep_mode
    when ``current_platform.is_sleep_mode_available()`` is False (CUDA/ROCm/XPU only)."""
    from vllm import AsyncEngineArgs

    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.rollout import sleep_mode_available

    ok, why = sleep_mode_available()
    assert not ok and "cpu" in why
    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    args = AsyncEngineArgs(model=str(model), dtype="float32", enable_sleep_mode=True)
    with pytest.raises(ValueError, match="Sleep mode is not supported"):
        args.create_engine_config()
