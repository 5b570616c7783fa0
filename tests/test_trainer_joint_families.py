"""Joint image + video micro-batches on every Qwen-VL family transformers has here.

A micro-batch mixing a video row, a video + image row, an image row and a text row must
give each row the log-probs it gets alone: the visual features of the batch are split back
to the right rows and placeholders, and the padding (left for prompts, right for
responses) changes nothing. Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5 (transformers'
``qwen3_5``: gated delta-net layers interleaved with attention, no deepstack) are built as
tiny random models. Qwen3.5 trains on the padded path; its packed path is refused, since a
linear-attention layer carries state across a packed boundary (trainer/packing.py).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from evalkit.engines.base import Request
from evalkit.errors import EvalkitError
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.batch import Group, Response, TrainBatch, collate
from evalkit.trainer.step import compute_logprobs
from tests.test_trainer_packing import SIZES, _video  # random clips on each patch grid

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

FAMILIES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5"]


def _family(actor: ActorPolicy) -> str:
    return str(actor.model.config.model_type)


def _requests(actor: ActorPolicy) -> list[Request]:
    family = _family(actor)
    h, w = SIZES[family]
    image = np.random.default_rng(7).integers(0, 255, (w, h, 3), dtype=np.uint8)  # portrait
    return [
        Request(id="clip", text="What moves?", videos=[_video(family, 1, 4, 0.5)]),
        Request(id="both", text="Same colour?", videos=[_video(family, 2, 2, 0.5)], images=[image]),
        Request(id="still", text="Colour of the square?", images=[image]),
        Request(id="plain", text="Say yes."),
    ]


@pytest.fixture(scope="module", params=FAMILIES)
def actor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ActorPolicy:
    from evalkit.tiny_checkpoint import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / request.param, request.param, 0)
    return ActorPolicy.from_pretrained(path)


def _batch(actor: ActorPolicy) -> TrainBatch:
    encoded = [actor.encode(r) for r in _requests(actor)]
    rng = np.random.default_rng(0)
    groups = [
        Group(g, enc.prompt_ids, [Response(rng.integers(100, 400, n).tolist())])
        for g, n in enumerate([3, 6, 2, 5])
        for enc in [encoded[g]]
    ]
    actor.set_rows(encoded)
    return collate(groups, pad_id=0)


@pytest.mark.timeout(300)
def test_a_mixed_micro_batch_gives_each_row_its_own_logprobs(actor: ActorPolicy) -> None:
    batch = _batch(actor)
    assert {len(r.images) + 2 * len(r.videos) for r in _requests(actor)} == {0, 1, 2, 3}
    mixed = compute_logprobs(actor, batch, micro_batch_size=4)  # all four rows together
    alone = compute_logprobs(actor, batch, micro_batch_size=1)
    mask = batch.response_mask.bool()
    assert torch.isfinite(mixed[mask]).all() and mixed[mask].abs().min() > 0.1
    torch.testing.assert_close(mixed[mask], alone[mask], rtol=0, atol=1e-5)


@pytest.mark.timeout(300)
def test_the_mixed_micro_batch_trains_every_part_it_uses(actor: ActorPolicy) -> None:
    batch = _batch(actor)
    actor.zero_grad(set_to_none=True)
    logits = actor.logits_for(batch)
    (logits.float().logsumexp(-1) * batch.attention_mask).sum().backward()
    grads = {n: p.grad for n, p in actor.named_parameters()}
    vision = [g for n, g in grads.items() if ".visual." in n]
    text = [g for n, g in grads.items() if ".visual." not in n]
    assert vision and all(g is not None and torch.isfinite(g).all() for g in vision)
    assert any(g is not None and g.abs().sum() > 0 for g in vision)  # real frames reach it
    assert all(g is not None and torch.isfinite(g).all() for g in text if g is not None)
    actor.zero_grad(set_to_none=True)


@pytest.mark.timeout(300)
def test_qwen3_5_packing_is_refused_by_name(actor: ActorPolicy) -> None:
    from evalkit.trainer.packing import refuse_linear_attention

    if not type(actor.model).__name__.startswith("Qwen3_5"):
        refuse_linear_attention(actor.model)  # attention-only families pack
        return
    with pytest.raises(EvalkitError, match="Qwen3_5ForConditionalGeneration has linear-attention"):
        refuse_linear_attention(actor.model)
