"""Rollout and training see the same video: for one cached video (trainer.frames cache
source), what vLLM makes of the rollout request and what the actor encodes for log-probs
agree exactly: prompt token ids (so the number of video tokens, and Qwen3-VL's timestamps
written into the prompt), video_grid_thw, Qwen2.5-VL's second_per_grid_ts, and the pixels
(vLLM normalises them later, in the model).

vLLM's side is read back from vLLM itself: the engine front end's own
``InputProcessor.process_inputs`` (vllm/v1/engine/input_processor.py, what
``AsyncLLM.generate`` runs before a request reaches the engine core), built from the
engine's config without starting engine processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests._engine_env import apply_engine_env

pytestmark = pytest.mark.heavy  # imports vLLM and builds its config (~30-60 s per family)


@pytest.fixture(scope="module")
def env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)
        yield


def _cached_request(root: Path, family: str) -> tuple[Any, Any, Path]:
    """A SynthVideo prompt whose frames come from the frame cache by path."""
    from evalkit.cache import FrameCache
    from evalkit.engines.base import SamplingParams
    from evalkit.synthvideo import generate, read_rows, to_unified
    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.actor import ActorPolicy
    from evalkit.trainer.config import DataConfig
    from evalkit.trainer.data import TrainData, load_items
    from evalkit.trainer.frames import CacheFrames, PromptLoader

    model = build_tiny_model(root / family, family, seed=0)
    ann = generate(root / "sv", 1, split="train", seed=0, families=["moving_shape"])
    data = ann.with_name("train.jsonl")
    data.write_text("".join(json.dumps(to_unified(r)) + "\n" for r in read_rows(ann)))
    cfg = DataConfig(
        train_path=str(data), video_max_pixels=12544, video_max_frames=6, shuffle=False
    )
    actor = ActorPolicy.from_pretrained(model)
    train = TrainData(load_items(data), cfg, FrameCache(root / "cache"), 0, actor.family.factor)
    train.build_cache()
    prompt = train.items[0].prompt()
    assert prompt.videos and Path(prompt.videos[0].entry).is_file()
    loader = PromptLoader(train.request_builder(SamplingParams()), CacheFrames())
    return actor, loader.request(prompt), model


def _vllm_view(model: Path, request: Any) -> Any:
    """The EngineCoreRequest vLLM's front end makes of evalkit's rollout input."""
    from vllm import AsyncEngineArgs
    from vllm import SamplingParams as VSamplingParams
    from vllm.renderers import renderer_from_config
    from vllm.v1.engine.input_processor import InputProcessor

    from evalkit.engines.prompting import render_prompt
    from evalkit.engines.vllm_engine import vllm_prompt

    args = AsyncEngineArgs(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        max_model_len=2048,
        limit_mm_per_prompt={"video": 1, "image": 1},
    )
    config = args.create_engine_config()
    renderer = renderer_from_config(config)
    processor = InputProcessor(config, renderer)
    inputs: Any = vllm_prompt(request, render_prompt(renderer.tokenizer, request))
    params = VSamplingParams(max_tokens=1)
    return processor.process_inputs("grid", inputs, params, supported_tasks=("generate",))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_rollout_and_actor_agree_on_grid_and_timestamps(
    env: None, tmp_path: Path, family: str
) -> None:
    actor, request, model = _cached_request(tmp_path, family)
    enc = actor.encode(request)  # what the log-prob and update forwards get
    got = _vllm_view(model, request)
    assert got.prompt_token_ids == enc.prompt_ids  # video token count, Qwen3-VL's "<t secs>"
    (feature,) = got.mm_features
    assert feature.modality == "video"
    vllm_kw = {k: v.data for k, v in feature.data.items()}
    grid = enc.visual["video_grid_thw"]
    assert torch.equal(vllm_kw["video_grid_thw"], grid[0])
    video_pad = actor.processor.tokenizer.convert_tokens_to_ids(actor.family.video_pad)
    merge = actor.family.merge_size
    assert enc.prompt_ids.count(video_pad) == int(grid[0].prod()) // merge**2
    if family == "qwen2_5_vl":  # the temporal M-RoPE step comes from here
        assert "second_per_grid_ts" in enc.visual
        assert float(vllm_kw["second_per_grid_ts"]) == float(enc.visual["second_per_grid_ts"][0])
    else:  # Qwen3-VL: timestamps are prompt text, covered by the token ids above
        text = actor.processor.tokenizer.decode(enc.prompt_ids)
        assert "seconds>" in text, text[:300]
    # vLLM's processor hands the model uint8 patches and normalises them in the model
    # (with the image processor's mean/std); normalised here, they are the actor's pixels
    pixels = _normalised(vllm_kw["pixel_values_videos"], actor.processor.image_processor)
    assert torch.allclose(pixels, enc.visual["pixel_values_videos"], atol=1e-6)


def _normalised(patches: torch.Tensor, image_processor: Any) -> torch.Tensor:
    """uint8 flattened patches (N, C*T*P*P) -> rescaled and normalised per channel."""
    if patches.is_floating_point():
        return patches
    mean = torch.tensor(image_processor.image_mean).view(1, -1, 1)
    std = torch.tensor(image_processor.image_std).view(1, -1, 1)
    x = patches.float().view(patches.shape[0], len(image_processor.image_mean), -1) / 255.0
    return ((x - mean) / std).view(patches.shape)


def _vllm_positions(family: str, config: Any, got: Any) -> torch.Tensor:
    """(3, L) M-RoPE positions vLLM's model class computes for the processed request."""
    if family == "qwen2_5_vl":
        from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration as M

        # the methods read only self.config; no model weights are needed
        holder = type("Holder", (), {"config": config, "iter_mm_grid_thw": M.iter_mm_grid_thw})
        pos, _ = M.get_mrope_input_positions(holder(), list(got.prompt_token_ids), got.mm_features)
    else:
        from vllm.model_executor.models.qwen3_vl import Qwen3VLForConditionalGeneration as M3

        pos, _ = M3._get_mrope_input_positions(list(got.prompt_token_ids), got.mm_features, config)
    return torch.as_tensor(pos)


def _vllm_greedy(model: Path, request: Any, n: int) -> tuple[list[int], list[float]]:
    """Greedy token ids and their log-probs from evalkit's vLLM engine (CPU)."""
    import asyncio
    import dataclasses

    from evalkit.engines.base import SamplingParams
    from evalkit.engines.vllm_engine import VLLMConfig, VLLMEngine

    greedy = dataclasses.replace(request, sampling=SamplingParams(max_tokens=n, logprobs=True))

    async def go() -> tuple[list[int], list[float]]:
        eng = VLLMEngine(
            VLLMConfig(
                model=str(model),
                dtype="float32",
                enforce_eager=True,
                max_num_batched_tokens=512,
                max_num_seqs=1,
                max_model_len=2048,
                enable_prefix_caching=False,
            )
        )
        try:
            out = await eng.generate(greedy)
        finally:
            await eng.close()
        assert out.token_ids is not None and out.logprobs is not None
        return list(out.token_ids[0]), list(out.logprobs[0])

    return asyncio.run(go())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_sparse_clip_positions_and_greedy_tokens_agree(
    env: None, tmp_path: Path, family: str
) -> None:
    """A cached SynthVideo clip (6 of 20 frames at 4 fps, indices [0, 4, 8, 11, 15, 19]:
    not every k-th frame; Qwen2.5-VL second_per_grid_ts 2 / (6 / 20 * 4) = 5/3) has a
    temporal grid whose M-RoPE extent (0, 3, 6) exceeds its spatial one (3 x 4 after the
    merge). Transformers 5.x resumed the text after it at the spatial extent, vLLM and the
    reference code after the largest position; the actor's positions and its teacher-forced
    greedy choices must be vLLM's."""
    from evalkit.trainer.visual_inputs import mm_token_types

    actor, request, model = _cached_request(tmp_path, family)
    meta = request.videos[0].meta
    assert meta.indices == [0, 4, 8, 11, 15, 19] and meta.total_frames == 20  # the sparse clip
    enc = actor.encode(request)
    got = _vllm_view(model, request)
    assert got.prompt_token_ids == enc.prompt_ids
    ids = torch.tensor(enc.prompt_ids)
    grids = {k: v for k, v in enc.visual.items() if k.endswith(("_grid_thw", "_grid_ts"))}
    kinds = mm_token_types(ids, actor.token_ids)
    hf_pos, _ = actor.model.model.get_rope_index(ids[None], mm_token_type_ids=kinds[None], **grids)
    vllm_pos = _vllm_positions(family, actor.model.config, got)
    end = int((kinds == 2).nonzero().max()) + 1  # first text token after the video
    assert hf_pos[:, 0].tolist() == vllm_pos.tolist(), (hf_pos[:, 0, end], vllm_pos[:, end])
    if family == "qwen2_5_vl":  # the case transformers 5.x got wrong: 6 + 1, not 3 + 4
        start = int(hf_pos[0, 0, end - 1]) - 6
        assert vllm_pos[:, end].tolist() == [start + 7] * 3

    n = 4
    tokens, logprobs = _vllm_greedy(model, request, n)
    assert len(tokens) == n
    full = torch.tensor(enc.prompt_ids + tokens)[None]
    with torch.no_grad():
        logits = actor.forward(full, torch.ones_like(full), enc.visual)
    steps = logits[0, len(enc.prompt_ids) - 1 : -1].float().log_softmax(-1)
    assert steps.argmax(-1).tolist() == tokens  # the actor would have chosen vLLM's tokens
    # and gives them vLLM's log-probs (the PPO ratio's denominator); with main's positions
    # the tokens happened to agree on this tiny model but these did not
    actor_lp = steps.gather(-1, torch.tensor(tokens)[:, None])[:, 0]
    assert torch.allclose(actor_lp, torch.tensor(logprobs), atol=1e-4), (actor_lp, logprobs)
