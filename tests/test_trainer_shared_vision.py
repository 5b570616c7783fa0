"""Old/ref log-probs with the vision tower run once per prompt equal the per-row path's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from evalkit.engines.base import Request
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.batch import Group, Response, TrainBatch, collate
from evalkit.trainer.step import compute_logprobs
from evalkit.video.types import Frames, VideoMeta

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

N = 3  # responses per prompt
SIZES = {"qwen2_5_vl": (56, 84), "qwen3_vl": (64, 96)}  # frames on each family's patch grid


def _video(family: str, seed: int, frames: int = 4) -> Frames:
    h, w = SIZES[family]
    rng = np.random.default_rng(seed)
    meta = VideoMeta(
        source_fps=2.0,
        total_frames=frames * 2,
        duration_s=frames,
        indices=list(range(0, frames * 2, 2)),
        timestamps=[float(i) for i in range(frames)],
        height=h,
        width=w,
        source_height=h,
        source_width=w,
        decoder="synthetic",
    )
    return Frames(rng.integers(0, 255, (frames, h, w, 3), dtype=np.uint8), meta)


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl"])
def actor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ActorPolicy:
    from evalkit.tiny_checkpoint import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / request.param, request.param, 0)
    return ActorPolicy.from_pretrained(path)


def _batch(actor: ActorPolicy) -> TrainBatch:
    """Two video prompts (different lengths, one with a still image too), N responses each."""
    family = "qwen3_vl" if type(actor.model).__name__.startswith("Qwen3") else "qwen2_5_vl"
    image = np.random.default_rng(9).integers(0, 255, (*SIZES[family], 3), dtype=np.uint8)
    requests = [
        Request(id="clip-a", text="What moves?", videos=[_video(family, 1)]),
        Request(id="clip-b", text="Count it.", videos=[_video(family, 2, 2)], images=[image]),
    ]
    encoded = [actor.encode(r) for r in requests]
    rng = np.random.default_rng(0)
    groups = [
        Group(
            g, enc.prompt_ids, [Response(rng.integers(100, 400, 2 + i).tolist()) for i in range(N)]
        )
        for g, enc in enumerate(encoded)
    ]
    actor.set_rows([enc for enc in encoded for _ in range(N)])
    return collate(groups, pad_id=0)


@pytest.fixture
def vision_calls(actor: ActorPolicy) -> Iterator[list[int]]:
    """Media (grid rows) given to the vision tower, one entry per call; the modality guard's
    zero-weighted dummy calls (all-zero pixels) are not media and are not counted."""
    calls: list[int] = []

    def count(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        assert grid is not None
        if not (grid.shape[0] == 1 and not args[0].any()):
            calls.append(int(grid.shape[0]))

    handle = actor.model.model.visual.register_forward_pre_hook(count, with_kwargs=True)
    yield calls
    handle.remove()


def _logprobs(actor: ActorPolicy, batch: TrainBatch, share: bool) -> torch.Tensor:
    actor.share_vision_per_group = share
    try:
        return compute_logprobs(actor, batch, micro_batch_size=2)  # groups cut across batches
    finally:
        actor.share_vision_per_group = True


@pytest.mark.timeout(300)
def test_shared_vision_logprobs_equal_the_per_row_path(actor: ActorPolicy) -> None:
    batch = _batch(actor)
    per_row = _logprobs(actor, batch, share=False)
    shared = _logprobs(actor, batch, share=True)
    mask = batch.response_mask.bool()
    assert torch.isfinite(per_row[mask]).all()
    # not bit-equal: the tower sees one video instead of a batch of n (other matmul shapes);
    # measured 4.8e-7 (Qwen2.5-VL) and 9.5e-7 (Qwen3-VL) on log-probs near -8, 1-2 ulps
    torch.testing.assert_close(shared[mask], per_row[mask], rtol=1e-6, atol=1e-6)


@pytest.mark.timeout(300)
def test_vision_tower_runs_once_per_prompt_not_per_row(
    actor: ActorPolicy, vision_calls: list[int]
) -> None:
    batch = _batch(actor)
    _logprobs(actor, batch, share=False)
    per_row = sum(vision_calls)
    vision_calls.clear()
    _logprobs(actor, batch, share=True)
    # per row: 2 prompts x N rows, each with its video (+ the image of the second prompt)
    assert per_row == 2 * N + N
    assert sum(vision_calls) == 2 + 1  # each prompt's video once, the image once


def test_update_forward_keeps_per_row_vision(actor: ActorPolicy, vision_calls: list[int]) -> None:
    batch = _batch(actor)
    actor.logits_for(batch.select(slice(0, N))).float().mean().backward()
    assert sum(vision_calls) == N  # with gradient: every row's video through the tower
    grads = [p.grad for p in actor.model.model.visual.parameters()]
    assert any(g is not None and torch.count_nonzero(g) > 0 for g in grads)
    actor.zero_grad(set_to_none=True)
