"""The HF actor: zero-weighted dummy visual input, strict placeholder/feature check."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from evalkit.engines.base import Request
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.visual_inputs import PlaceholderMismatch, check_placeholders
from evalkit.video.types import Frames, VideoMeta

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def actor(tmp_path_factory: pytest.TempPathFactory) -> ActorPolicy:
    from evalkit.tiny_checkpoint import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", "qwen2_5_vl", seed=0)
    return ActorPolicy.from_pretrained(path)


def _video_request(rid: str = "clip-1") -> Request:
    t, h, w = 4, 56, 84
    rng = np.random.default_rng(0)
    meta = VideoMeta(
        source_fps=4.0,
        total_frames=16,
        duration_s=4.0,
        indices=[0, 4, 8, 12],
        timestamps=[0.0, 1.0, 2.0, 3.0],
        height=h,
        width=w,
        source_height=h,
        source_width=w,
        decoder="synthetic",
    )
    frames = Frames(rng.integers(0, 255, (t, h, w, 3), dtype=np.uint8), meta)
    return Request(id=rid, text="What moves?", videos=[frames])


def test_text_only_batch_gives_every_vision_parameter_a_zero_gradient(actor: ActorPolicy) -> None:
    enc = actor.encode(Request(id="text-1", text="Is the sky blue?"))
    assert not enc.visual
    group = Group(0, enc.prompt_ids, [Response([5, 6, 7]), Response([8, 9])])
    batch = collate([group], pad_id=0)
    actor.set_rows([enc, enc])
    actor.zero_grad(set_to_none=True)
    actor.logits_for(batch).float().mean().backward()
    vision = dict(actor.model.model.visual.named_parameters())
    assert vision
    missing = [n for n, p in vision.items() if p.grad is None]
    assert missing == []
    assert all(torch.count_nonzero(p.grad) == 0 for p in vision.values())
    text_grads = [p.grad for n, p in actor.model.named_parameters() if "visual" not in n]
    assert all(g is not None for g in text_grads)
    assert any(torch.count_nonzero(g) > 0 for g in text_grads if g is not None)


def test_video_prompt_placeholders_match_features(actor: ActorPolicy) -> None:
    enc = actor.encode(_video_request())
    grid = enc.visual["video_grid_thw"]
    rows = int(grid.prod(-1).sum()) // actor.family.merge_size**2
    assert rows > 0
    assert enc.prompt_ids.count(actor.token_ids["video"]) == rows


def test_missing_placeholder_is_refused_naming_the_sample(actor: ActorPolicy) -> None:
    enc = actor.encode(_video_request("clip-7"))
    ids = list(enc.prompt_ids)
    ids.remove(actor.token_ids["video"])  # e.g. a prompt cut inside its video
    with pytest.raises(PlaceholderMismatch, match=r"clip-7: \d+ video placeholder tokens but"):
        check_placeholders(
            torch.tensor(ids), enc.visual, actor.token_ids, actor.family.merge_size, "clip-7"
        )


def test_batch_forward_checks_rows_against_their_visual_inputs(actor: ActorPolicy) -> None:
    enc = actor.encode(_video_request("clip-9"))
    ids = list(enc.prompt_ids)
    ids.remove(actor.token_ids["video"])
    batch = collate([Group(0, ids, [Response([5, 6])])], pad_id=0)
    actor.set_rows([enc])
    with pytest.raises(PlaceholderMismatch, match="clip-9"):
        actor.logits_for(batch)


def test_video_batch_forward_is_finite_and_reaches_the_vision_tower(actor: ActorPolicy) -> None:
    enc = actor.encode(_video_request())
    batch = collate([Group(0, enc.prompt_ids, [Response([5, 6, 7]), Response([8])])], pad_id=0)
    actor.set_rows([enc, enc])
    actor.zero_grad(set_to_none=True)
    logits = actor.logits_for(batch)
    assert torch.isfinite(logits).all()
    logits.float().mean().backward()
    grads = [p.grad for p in actor.model.model.visual.parameters()]
    assert any(g is not None and torch.count_nonzero(g) > 0 for g in grads)


def test_single_process_means_no_fsdp(actor: ActorPolicy) -> None:
    from evalkit.trainer.actor import maybe_fsdp

    assert maybe_fsdp(actor.model) is actor.model
    assert type(actor.model).__name__.startswith("Qwen2_5_VL")


def test_encode_rejects_frames_off_the_patch_grid(actor: ActorPolicy, tmp_path: Path) -> None:
    from evalkit.errors import EvalkitError

    req = _video_request()
    bad = Frames(req.videos[0].array[:, :50], req.videos[0].meta)
    with pytest.raises(EvalkitError, match="not multiples of 28"):
        actor.encode(Request(id="odd", text="?", videos=[bad]))


def test_qwen3_vl_dummy_input_and_placeholders(tmp_path: Path) -> None:
    from evalkit.tiny_checkpoint import build_tiny_model

    qwen3 = ActorPolicy.from_pretrained(build_tiny_model(tmp_path / "q3", "qwen3_vl", seed=0))
    req = _video_request()
    t, _, _, c = req.videos[0].array.shape
    frames = Frames(np.zeros((t, 64, 96, c), dtype=np.uint8), req.videos[0].meta)
    enc = qwen3.encode(Request(id="q3-clip", text="What?", videos=[frames]))
    assert enc.prompt_ids.count(qwen3.token_ids["video"]) > 0
    text = qwen3.encode(Request(id="q3-text", text="Hi"))
    qwen3.set_rows([text])
    qwen3.logits_for(collate([Group(0, text.prompt_ids, [Response([7])])], 0)).mean().backward()
    assert all(p.grad is not None for p in qwen3.model.model.visual.parameters())
