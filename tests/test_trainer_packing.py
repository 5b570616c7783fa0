"""Padding-free log-probs (trainer.packing) equal the padded path's; token-budget micro-batches."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from evalkit.engines.base import Request
from evalkit.trainer import packing
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.batch import Group, Response, TrainBatch, collate
from evalkit.trainer.entropy import logprobs_and_entropy
from evalkit.trainer.packing import chunked_logprobs, pack_batch
from evalkit.trainer.step import compute_logprobs
from evalkit.trainer.visual_inputs import PlaceholderMismatch, mm_token_types
from evalkit.video.types import Frames, VideoMeta

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

SIZES = {
    "qwen2_vl": (56, 84),
    "qwen2_5_vl": (56, 84),
    "qwen3_vl": (64, 96),
    "qwen3_5": (64, 96),
}  # frames on each family's patch grid


def _video(family: str, seed: int, frames: int, step_s: float) -> Frames:
    """``frames`` frames ``step_s`` seconds apart (the step sets Qwen2.5-VL's seconds per
    temporal patch and Qwen3-VL's timestamps in the prompt)."""
    h, w = SIZES[family]
    fps = 1.0 / step_s
    meta = VideoMeta(
        source_fps=fps,
        total_frames=frames,
        duration_s=frames * step_s,
        indices=list(range(frames)),
        timestamps=[i * step_s for i in range(frames)],
        height=h,
        width=w,
        source_height=h,
        source_width=w,
        decoder="synthetic",
    )
    pixels = np.random.default_rng(seed).integers(0, 255, (frames, h, w, 3), dtype=np.uint8)
    return Frames(pixels, meta)


def _family(actor: ActorPolicy) -> str:
    name = type(actor.model).__name__
    return {"Qwen3VL": "qwen3_vl", "Qwen2_5_VL": "qwen2_5_vl"}.get(
        name[: -len("ForConditionalGeneration")], "qwen2_vl"
    )


def _requests(family: str) -> list[Request]:
    """Video, video + image, image only and text only prompts of different lengths."""
    image = np.random.default_rng(9).integers(0, 255, (*SIZES[family], 3), dtype=np.uint8)
    return [
        Request(id="clip-a", text="What moves?", videos=[_video(family, 1, 4, 1.0)]),
        Request(
            id="clip-b", text="Count it now.", videos=[_video(family, 2, 2, 0.5)], images=[image]
        ),
        Request(id="still", text="Colour?", images=[image]),
        Request(id="plain", text="Say yes."),
    ]


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def actor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ActorPolicy:
    from evalkit.tiny_checkpoint import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / request.param, request.param, 0)
    return ActorPolicy.from_pretrained(path)


def _batch(actor: ActorPolicy, prompts: list[list[int]] | None = None) -> TrainBatch:
    """Two responses per prompt (lengths 0-6 tokens, one empty), rows set on the actor."""
    encoded = [actor.encode(r) for r in _requests(_family(actor))]
    rng = np.random.default_rng(0)
    lengths = [[3, 5], [6, 1], [0, 4], [2, 3]]
    groups = [
        Group(
            g,
            prompts[g] if prompts is not None else enc.prompt_ids,
            [Response(rng.integers(100, 400, n).tolist()) for n in lengths[g]],
        )
        for g, enc in enumerate(encoded)
    ]
    actor.set_rows([enc for enc in encoded for _ in range(2)])
    return collate(groups, pad_id=0)


def _padding_free(actor: ActorPolicy, on: bool) -> None:
    actor.padding_free = on
    actor.logprob_chunk_tokens = 5  # several chunks even on these short responses


@pytest.fixture
def padded(actor: ActorPolicy) -> Any:
    yield
    actor.padding_free = False


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("padded")
def test_packed_logprobs_equal_padded_logprobs(actor: ActorPolicy) -> None:
    batch = _batch(actor)
    _padding_free(actor, False)
    want = compute_logprobs(actor, batch, micro_batch_size=3)  # groups cut across batches
    _padding_free(actor, True)
    got = compute_logprobs(actor, batch, micro_batch_size=3)
    mask = batch.response_mask.bool()
    assert torch.isfinite(want[mask]).all() and want[mask].abs().min() > 1.0
    torch.testing.assert_close(got[mask], want[mask], rtol=0, atol=1e-5)
    assert torch.equal(got[~mask], torch.zeros_like(got[~mask]))


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("padded")
def test_packed_update_forward_equals_padded_with_gradients(actor: ActorPolicy) -> None:
    batch = _batch(actor)
    mask = batch.response_mask
    out = {}
    for on in (False, True):
        _padding_free(actor, on)
        actor.zero_grad(set_to_none=True)
        logp, entropy = logprobs_and_entropy(actor, batch, temperature=0.7, entropy_grad=True)
        ((logp + 0.1 * entropy) * mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in actor.named_parameters() if p.grad is not None}
        out[on] = (logp.detach(), entropy.detach(), grads)
    actor.zero_grad(set_to_none=True)
    (lp0, ent0, g0), (lp1, ent1, g1) = out[False], out[True]
    m = mask.bool()
    torch.testing.assert_close(lp1[m], lp0[m], rtol=0, atol=1e-5)
    torch.testing.assert_close(ent1[m], ent0[m], rtol=0, atol=1e-5)
    assert g0.keys() == g1.keys() and any("visual" in n for n in g0)
    for name, grad in g0.items():
        torch.testing.assert_close(g1[name], grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("padded")
def test_attention_across_packed_sequences_would_change_logprobs(
    actor: ActorPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: one text position run over the whole row (no restart at each
    sequence) lets sequences attend to each other, and the log-probs move."""
    batch = _batch(actor)
    _padding_free(actor, True)
    exact = compute_logprobs(actor, batch, micro_batch_size=8)

    def one_sequence(*args: Any) -> packing.PackedBatch:
        packed = pack_batch(*args)
        packed.position_ids[0, 0] = torch.arange(packed.input_ids.shape[1])
        return packed

    monkeypatch.setattr(packing, "pack_batch", one_sequence)
    crossed = compute_logprobs(actor, batch, micro_batch_size=8)
    mask = batch.response_mask.bool()
    first = batch.row_index == 0
    assert torch.equal(crossed[first], exact[first])  # the first sequence sees nothing new
    assert (crossed[mask] - exact[mask]).abs().max() > 1e-3


def test_positions_restart_per_sequence_and_follow_each_sequences_grids(
    actor: ActorPolicy,
) -> None:
    batch = _batch(actor)
    _, encoded = actor.batch_rows(batch)
    packed = pack_batch(batch, actor.model, [e.visual for e in encoded], actor.token_ids)
    bounds = packed.cu_seqlens.tolist()
    assert bounds[-1] == packed.input_ids.shape[1] == int(batch.attention_mask.sum())
    model: Any = actor.model
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        assert packed.position_ids[0, 0, start:end].tolist() == list(range(end - start))
        # the padded path's positions: get_rope_index over the whole padded batch
        row = batch.select(slice(i, i + 1))
        visual = encoded[i].visual
        grids = {k: v for k, v in visual.items() if k in packing.ROPE_KEYS}
        kinds = mm_token_types(row.input_ids, actor.token_ids)
        want, _ = model.model.get_rope_index(
            row.input_ids, mm_token_type_ids=kinds, attention_mask=row.attention_mask, **grids
        )
        attended = row.attention_mask[0].bool()
        assert torch.equal(packed.position_ids[1:, 0, start:end], want[:, 0, attended])


def test_each_videos_own_time_reaches_its_sequence(actor: ActorPolicy) -> None:
    """The two videos are sampled at different rates: Qwen2.5-VL's seconds per temporal
    patch (temporal M-RoPE spacing) or Qwen3-VL's timestamps (prompt text) differ; Qwen2-VL
    has no time input (temporal positions are patch indices)."""
    family = _family(actor)
    a, b = (actor.encode(r) for r in _requests(family)[:2])
    if family == "qwen2_vl":
        assert "second_per_grid_ts" not in a.visual
    elif family == "qwen2_5_vl":
        assert float(a.visual["second_per_grid_ts"]) == 2.0  # 2 frames per patch, 1 s apart
        assert float(b.visual["second_per_grid_ts"]) == 1.0
    else:
        decode = actor.processor.tokenizer.decode
        stamps = [re.findall(r"<([\d.]+) seconds>", decode(e.prompt_ids)) for e in (a, b)]
        # mid-points of each 2-frame patch, one decimal (the processor's "%.1f": 0.25 -> 0.2)
        assert stamps == [["0.5", "2.5"], ["0.2"]]


@pytest.mark.usefixtures("padded")
def test_placeholder_mismatch_on_the_packed_path_raises(actor: ActorPolicy) -> None:
    clean = _batch(actor)
    _, encoded = actor.batch_rows(clean)
    video = actor.token_ids["video"]
    cut = list(encoded[2].prompt_ids)  # clip-b: drop two of its video placeholders
    cut.remove(video)
    cut.remove(video)
    prompts = [e.prompt_ids for e in encoded[::2]]
    prompts[1] = cut
    batch = _batch(actor, prompts)
    _padding_free(actor, True)
    with pytest.raises(PlaceholderMismatch) as err:
        compute_logprobs(actor, batch, micro_batch_size=8)
    rows = int(encoded[2].visual["video_grid_thw"].prod(-1).sum()) // actor.family.merge_size**2
    message = str(err.value)
    assert "'clip-b'" in message
    assert f"{rows - 2} video placeholder tokens but {rows} video feature rows" in message
    assert "truncated" in message


def test_placeholder_check_names_resized_frames_when_tokens_exceed_features(
    actor: ActorPolicy,
) -> None:
    batch = _batch(actor)
    _, encoded = actor.batch_rows(batch)
    grid = encoded[0].visual["video_grid_thw"].clone()
    grid[0, 2] -= actor.family.merge_size  # frames narrower than the prompt was built for
    encoded[0] = dataclasses.replace(
        encoded[0], visual=dict(encoded[0].visual, video_grid_thw=grid)
    )
    with pytest.raises(PlaceholderMismatch, match=r"'clip-a'.*resized smaller"):
        packing.check_sequence_placeholders(
            batch, encoded, actor.token_ids, actor.family.merge_size
        )


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_chunked_logprobs_equal_full_logits(chunk: int) -> None:
    torch.manual_seed(0)
    head = nn.Linear(16, 50, bias=False)
    hidden = torch.randn(11, 16, requires_grad=True)
    targets = torch.randint(0, 50, (11,))
    logp, entropy = chunked_logprobs(hidden, head, targets, 0.7, chunk, entropy_grad=True)
    full = torch.log_softmax(head(hidden) / 0.7, dim=-1)
    want = full.gather(-1, targets[:, None]).squeeze(-1)
    want_entropy = -(full.exp() * full).sum(-1)
    torch.testing.assert_close(logp, want, rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy, want_entropy, rtol=0, atol=1e-6)
    (g_chunk,) = torch.autograd.grad((logp + entropy).sum(), hidden)
    (g_full,) = torch.autograd.grad((want + want_entropy).sum(), hidden)
    torch.testing.assert_close(g_chunk, g_full, rtol=0, atol=1e-6)


def test_linear_attention_models_are_refused() -> None:
    from types import SimpleNamespace

    from evalkit.errors import EvalkitError

    text = SimpleNamespace(layer_types=["linear_attention", "full_attention"])
    model = SimpleNamespace(config=SimpleNamespace(text_config=text))
    with pytest.raises(EvalkitError, match="padding_free: false"):
        packing.refuse_linear_attention(model)


@pytest.fixture(scope="module")
def recipe_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from evalkit.synthvideo import generate, write_unified
    from evalkit.tiny_checkpoint import build_tiny_model

    root = tmp_path_factory.mktemp("packed_recipe")
    model = build_tiny_model(root / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(root / "sv", 2, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = write_unified(ann)
    return {"root": root, "model": model, "data": data}


def _one_step(d: dict[str, Path], run: str, *extra: str) -> tuple[dict, dict[str, torch.Tensor]]:
    from evalkit.trainer.config import load_config
    from evalkit.trainer.recipe import GRPORecipe

    overrides = [
        f"model={d['model']}",
        f"data.train_path={d['data']}",
        f"data.cache_root={d['root'] / 'cache'}",
        "data.video_max_pixels=12544",
        "data.video_max_frames=4",
        "rollout.n=3",
        "rollout.max_response_tokens=12",
        "schedule.batch_size=2",
        "schedule.micro_batch_size=2",
        "schedule.steps=1",
        "optimizer.lr=0.001",
        "algorithm.kl.estimator=k3",  # a reference model: its log-probs take the path too
        "algorithm.kl.coef=0.01",
        "actor.entropy_coeff=0.01",
        f"checkpoint.dir={d['root'] / run / 'ckpt'}",
        *extra,
    ]
    recipe = GRPORecipe(load_config(None, overrides))
    recipe.setup(resume=False)
    try:
        (record,) = recipe.run()
        return record, {k: v.detach().clone() for k, v in recipe.actor.state_dict().items()}
    finally:
        recipe.cleanup()


@pytest.mark.timeout(600)
def test_recipe_step_padding_free_with_token_budget_equals_the_padded_step(
    recipe_dir: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    padded, before = _one_step(recipe_dir, "padded")
    packed_rows: list[int] = []  # rows of every padding-free forward
    real = packing.packed_logprobs

    def spy(actor: ActorPolicy, batch: TrainBatch, *args: Any) -> Any:
        packed_rows.append(len(batch))
        return real(actor, batch, *args)

    monkeypatch.setattr(packing, "packed_logprobs", spy)
    packed, after = _one_step(
        recipe_dir,
        "packed",
        "actor.padding_free=true",
        "actor.use_dynamic_bsz=true",
        "actor.max_token_len_per_gpu=700",
        "actor.logprob_chunk_tokens=4",
    )
    # old, ref and update passes over 6 rows, cut by the budget (not 2 rows at a time)
    assert sum(packed_rows) == 3 * 6 and max(packed_rows) > 2, packed_rows
    assert packed["response_length"] == padded["response_length"]  # the same rollouts
    for key in ("loss", "grad_norm", "entropy", "kl", "ratio_mean"):
        assert packed[key] == pytest.approx(padded[key], rel=1e-4, abs=1e-6), key
    assert padded["grad_norm"] > 0
    for name, value in before.items():
        torch.testing.assert_close(after[name], value, rtol=1e-4, atol=1e-6, msg=name)
