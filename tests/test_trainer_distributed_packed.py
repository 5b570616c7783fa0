"""Padding-free packing, token-budget micro-batches and per-prompt vision on 2 FSDP2 workers.

One module-scoped group per family (Qwen2.5-VL, Qwen3-VL; local Ray, gloo, ``padding_free``
and vision sharing on) against the padded single-process reference: a packed step with
rank 0 holding image and text rows and rank 1 video rows equals the padded step; under a
token budget the ranks agree on one micro-batch count although their own counts differ;
old log-probs with vision encoded once per prompt (2 prompts on one rank, none on the
other) equal the per-row path; a placeholder/feature mismatch raises on the workers' packed
path. Heavy: Ray and two worker processes per family (~70 s a family on 2 cores).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evalkit.engines.base import Request
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.algorithms.aggregation import AggNorm
from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.config import OptimizerConfig
from evalkit.trainer.distributed.group import split_for_ranks
from evalkit.trainer.dynamic_batch import micro_batch_slices
from evalkit.trainer.model_parts import trainable_parameters
from evalkit.trainer.step import (
    StepInputs,
    StepSettings,
    accumulate_loss,
    build_optimizer,
    compute_logprobs,
)
from evalkit.trainer.visual_inputs import Encoded
from tests._distributed import local_ray, tiny_model
from tests.test_trainer_packing import SIZES, _video  # random clips on each patch grid

os.environ.setdefault("HF_HUB_OFFLINE", "1")
OPT = OptimizerConfig(lr=1e-4, weight_decay=0.0, grad_clip=1.0)
SETTINGS = StepSettings(micro_batch_size=2, grad_clip=1.0, loss_agg_mode="token-mean")
VIDEO, IMAGE, TEXT = [0, 1], [2, 3], [4, 5]  # batch rows of each prompt


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_vl"])
def family(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def tiny(family: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory, family)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    with local_ray(num_cpus=2) as ray:
        yield ray


@pytest.fixture(scope="module")
def group(tiny: Path, ray_local: Any) -> Iterator[Any]:
    """Two packed workers (vision shared in log-prob passes, chunks of 3 tokens)."""
    from evalkit.trainer.distributed.group import GroupSpec, WorkerGroup
    from evalkit.trainer.distributed.worker import WorkerSpec

    spec = WorkerSpec(
        model_dir=str(tiny),
        optimizer=OPT,
        world_size=2,
        keep_grads=True,
        padding_free=True,
        logprob_chunk_tokens=3,
        share_vision=True,
        timeout_s=120.0,
    )
    started = WorkerGroup(GroupSpec(world_size=2, call_timeout_s=300), spec).start()
    yield started
    started.shutdown()


def _rows(actor: ActorPolicy, family: str) -> list[Encoded]:
    """A video, an image and a text prompt, two rows each (rows 0-1, 2-3, 4-5)."""
    image = np.random.default_rng(9).integers(0, 255, (*SIZES[family], 3), dtype=np.uint8)
    clip = _video(family, 1, 4, 1.0)
    video = actor.encode(Request(id="clip-1", text="What moves?", videos=[clip]))
    still = actor.encode(Request(id="still-1", text="What colour dominates?", images=[image]))
    text = actor.encode(Request(id="text-1", text="Is the sky blue?"))
    return [video, video, still, still, text, text]


def _inputs(rows: list[Encoded]) -> StepInputs:
    """Responses of 1-4 tokens; old log-probs perturbed so the ratio departs from 1."""
    lengths = [[3, 2], [4, 1], [2, 3]]
    groups = [
        Group(g, rows[2 * g].prompt_ids, [Response(list(range(105, 105 + n))) for n in lengths[g]])
        for g in range(3)
    ]
    batch = collate(groups, pad_id=0)
    mask = batch.response_mask.float()
    gen = torch.Generator().manual_seed(0)
    old = (-3.0 + 0.3 * torch.randn(mask.shape, generator=gen)) * mask
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.25, -0.75])[:, None] * mask
    return StepInputs(batch, old, adv)


def _padded_step(
    tiny: Path, inputs: StepInputs, rows: list[Encoded], settings: StepSettings
) -> tuple[float, dict[str, torch.Tensor]]:
    """The reference: one padded update in this process (no FSDP); loss and new weights."""
    actor = ActorPolicy.from_pretrained(tiny)
    optimizer = build_optimizer(trainable_parameters(actor), OPT)
    actor.train()
    actor.set_rows(rows)
    norm = AggNorm.of(inputs.batch.response_mask)
    result = accumulate_loss(actor, inputs, replace(settings, max_token_len=None), norm=norm)
    params = [p for p in actor.parameters() if p.grad is not None]
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    return result.loss, {k: v.detach().clone() for k, v in actor.state_dict().items()}


def _worst(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> float:
    assert sorted(got) == sorted(want)
    return max(float((got[k] - want[k]).abs().max()) for k in want)


def _restore(group: Any, state: dict[str, torch.Tensor]) -> None:
    """Put ``state`` back on every rank (each test starts from the initial weights)."""

    def load(worker: Any, full: dict[str, torch.Tensor]) -> None:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
        )

        options = StateDictOptions(full_state_dict=True)
        set_model_state_dict(worker.actor, full, options=options)
        worker.optimizer.state.clear()

    group._get([w.__ray_call__.remote(load, state) for w in group.workers])


@pytest.fixture(scope="module")
def initial(group: Any) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = group.full_state()
    return state


@pytest.mark.heavy
@pytest.mark.timeout(500)
def test_packed_step_with_modalities_split_across_ranks_equals_the_padded_step(
    group: Any, tiny: Path, family: str, initial: dict[str, torch.Tensor]
) -> None:
    _restore(group, initial)
    rows = _rows(ActorPolicy.from_pretrained(tiny), family)
    inputs = _inputs(rows)
    want_loss, want = _padded_step(tiny, inputs, rows, SETTINGS)
    # rank 0: the image and the text rows; rank 1: the video rows (+ 2 zero-weight fillers)
    result = group.update(inputs, rows, SETTINGS, parts=[IMAGE + TEXT, VIDEO])
    assert abs(result.loss - want_loss) < 1e-5
    first, second = group.traces()
    assert first == ["image", "video:dummy", "image:dummy", "video:dummy"]
    assert second == ["image:dummy", "video"] * 2
    states = group.state_dicts()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert _worst(states[0], want) < 1e-5
    assert _worst(states[0], initial) > 1e-6  # the step moved the weights


@pytest.mark.heavy
@pytest.mark.timeout(500)
def test_token_budget_ranks_agree_on_one_micro_batch_count(
    group: Any, tiny: Path, family: str, initial: dict[str, torch.Tensor]
) -> None:
    _restore(group, initial)
    rows = _rows(ActorPolicy.from_pretrained(tiny), family)
    inputs = _inputs(rows)
    parts = [TEXT, VIDEO + IMAGE]
    shards = [s.inputs.batch for s in split_for_ranks(inputs, rows, 2, parts)]  # as sent
    budget = int(shards[0].attention_mask.sum())  # the text rank's rows (fillers too) in one
    own = [len(micro_batch_slices(b, 1, budget)) for b in shards]
    assert own[0] < own[1], f"the text rank must need fewer micro-batches: {own}"
    settings = replace(SETTINGS, micro_batch_size=1, max_token_len=budget)
    want_loss, want = _padded_step(tiny, inputs, rows, settings)
    result = group.update(inputs, rows, settings, parts=parts)
    assert abs(result.loss - want_loss) < 1e-5
    short, long = group.traces()
    assert len(short) == len(long) == 2 * own[1]  # the same forwards: 2 tower calls each
    assert _worst(group.full_state(), want) < 1e-5


@pytest.mark.heavy
@pytest.mark.timeout(500)
def test_shared_vision_logprobs_on_the_workers_equal_the_per_row_path(
    group: Any, tiny: Path, family: str, initial: dict[str, torch.Tensor]
) -> None:
    _restore(group, initial)
    actor = ActorPolicy.from_pretrained(tiny)
    rows = _rows(actor, family)
    batch = _inputs(rows).batch
    actor.share_vision_per_group = False
    actor.set_rows(rows)
    want = compute_logprobs(actor, batch, micro_batch_size=1)  # padded, vision per row
    # rank 0: the video and image prompts (2 tower calls); rank 1: text only (2 dummies)
    got = group.logprobs(batch, rows, 1, max_token_len=None, parts=[VIDEO + IMAGE, TEXT])
    mask = batch.response_mask  # the packed path leaves 0 off the mask, padded does not
    assert float(((got - want) * mask).abs().max()) < 1e-5
    first, second = group.traces()
    assert first == ["shared", "shared"]
    assert second == ["shared:dummy", "shared:dummy"]


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_placeholder_mismatch_on_the_workers_packed_path_raises(
    group: Any, tiny: Path, family: str
) -> None:
    from ray.exceptions import RayError

    actor = ActorPolicy.from_pretrained(tiny)
    rows = _rows(actor, family)[:2]
    ids = list(rows[0].prompt_ids)
    ids.remove(actor.token_ids["video"])  # e.g. a prompt cut inside its video
    cut = Encoded("clip-cut", ids, rows[0].visual)
    batch = collate([Group(0, ids, [Response([105, 106]), Response([107])])], pad_id=0)
    with pytest.raises(RayError, match=r"clip-cut.*padding-free.*video placeholder tokens but"):
        group.logprobs(batch, [cut, cut], 1)
