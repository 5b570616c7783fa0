"""The modality guard on one process: the same vision calls for every micro-batch, and the
dummy calls' gradient contribution is exactly zero (bit-equal gradients with and without).

The cross-rank half (FSDP collectives pairing up, the negative control) is in
tests/test_trainer_distributed.py.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from evalkit.engines.base import Request
from evalkit.trainer.actor import ActorPolicy, DummyMode
from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.visual_inputs import Encoded
from evalkit.video.types import Frames, VideoMeta

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5"])
def actor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ActorPolicy:
    from evalkit.tiny_checkpoint import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", request.param, seed=0)
    return ActorPolicy.from_pretrained(path)


def _side(actor: ActorPolicy) -> int:
    return int(actor.family.patch_size * actor.family.merge_size * 2)


def _video(actor: ActorPolicy) -> Request:
    side = _side(actor)
    meta = VideoMeta(
        source_fps=2.0,
        total_frames=4,
        duration_s=2.0,
        indices=[0, 1, 2, 3],
        timestamps=[0.0, 0.5, 1.0, 1.5],
        height=side,
        width=side,
        source_height=side,
        source_width=side,
        decoder="synthetic",
    )
    pixels = np.random.default_rng(0).integers(0, 255, (4, side, side, 3), dtype=np.uint8)
    return Request(id="clip", text="What moves?", videos=[Frames(pixels, meta)])


def _image(actor: ActorPolicy) -> Request:
    side = _side(actor)
    pixels = np.random.default_rng(1).integers(0, 255, (side, side, 3), dtype=np.uint8)
    return Request(id="pic", text="What is shown?", images=[pixels])


def _grads(actor: ActorPolicy, enc: Encoded, mode: DummyMode) -> dict[str, torch.Tensor | None]:
    batch = collate([Group(0, enc.prompt_ids, [Response([101, 102, 103])])], pad_id=0)
    actor.set_rows([enc])
    actor.dummy_mode = mode
    actor.vision_trace.clear()
    actor.zero_grad(set_to_none=True)
    try:
        actor.logits_for(batch).float().logsumexp(-1).mean().backward()
    finally:
        actor.dummy_mode = "per_kind"
    return {n: None if p.grad is None else p.grad.clone() for n, p in actor.named_parameters()}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["image", "video"])
def test_one_modality_gets_a_dummy_for_the_other_with_zero_contribution(
    actor: ActorPolicy, kind: str
) -> None:
    enc = actor.encode(_image(actor) if kind == "image" else _video(actor))
    off = _grads(actor, enc, "off")
    assert actor.vision_trace == [kind]
    guarded = _grads(actor, enc, "per_kind")
    other = "video" if kind == "image" else "image"
    want = [kind, f"{other}:dummy"] if kind == "image" else [f"{other}:dummy", kind]
    assert actor.vision_trace == want  # image slot first, then video, on every micro-batch
    assert sorted(off) == sorted(guarded)
    for name, grad in off.items():  # the dummy adds exactly 0 to every gradient
        g = guarded[name]
        assert (grad is None and g is None) or (
            grad is not None and g is not None and torch.equal(grad, g)
        ), name


@pytest.mark.timeout(300)
def test_text_only_makes_both_dummy_calls_and_zero_vision_gradients(actor: ActorPolicy) -> None:
    enc = actor.encode(Request(id="txt", text="Is the sky blue?"))
    grads = _grads(actor, enc, "per_kind")
    assert actor.vision_trace == ["image:dummy", "video:dummy"]
    vision = {n: g for n, g in grads.items() if ".visual." in n}
    assert vision and all(g is not None and torch.count_nonzero(g) == 0 for g in vision.values())
    if type(actor.model).__name__.startswith("Qwen3VL"):  # deepstack mergers joined as well
        # (Qwen3.5's vision tower has none: transformers' Qwen3_5VisionModel)
        assert any("deepstack" in n for n in vision)


@pytest.mark.timeout(300)
def test_legacy_mode_makes_one_dummy_call_only_without_media(actor: ActorPolicy) -> None:
    _grads(actor, actor.encode(Request(id="txt", text="Hi")), "any")
    assert actor.vision_trace == ["image:dummy"]
    _grads(actor, actor.encode(_video(actor)), "any")
    assert actor.vision_trace == ["video"]  # a rank with images too would call twice: hang
