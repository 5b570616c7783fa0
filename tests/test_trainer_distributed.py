"""Data parallelism on a local Ray instance: 2 FSDP2 workers on gloo against one process.

What is shown: a 2-worker step equals the single-process step on the same batch (loss,
gradients, parameters); a rank with a text-only micro-batch and a rank with a video-only
one finish the step, make the same vision-tower calls, and end with identical parameters;
with the dummy vision calls turned off the same split fails (an error or the process
group's 20 s timeout) instead of passing. Each test starts Ray and two worker processes
(~80 s set-up on 2 cores, ~140 s for the module), so all are heavy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evalkit.engines.base import Request
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.algorithms.aggregation import AggNorm
from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.config import OptimizerConfig
from evalkit.trainer.model_parts import trainable_parameters
from evalkit.trainer.step import StepInputs, StepSettings, accumulate_loss, build_optimizer
from evalkit.trainer.visual_inputs import Encoded
from tests._distributed import local_ray, tiny_model
from tests.test_trainer_actor import _video_request  # the same 4-frame random clip

os.environ.setdefault("HF_HUB_OFFLINE", "1")
OPT = OptimizerConfig(lr=1e-4, weight_decay=0.0, grad_clip=1.0)
SETTINGS = StepSettings(micro_batch_size=1, grad_clip=1.0, loss_agg_mode="token-mean")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    # 4 logical slots on 2 cores: the negative control's group starts while the module's
    # pair of workers is alive (idle); the two groups never compute at the same time
    with local_ray(num_cpus=4) as ray:
        yield ray


def _inputs(actor: ActorPolicy) -> tuple[StepInputs, list[Encoded]]:
    """Rows 0-1 answer a video prompt, rows 2-3 a text prompt; old log-probs perturbed so
    the ratio departs from 1 and clipping can act."""
    video = actor.encode(_video_request())
    text = actor.encode(Request(id="text-1", text="Is the sky blue?"))
    groups = [
        Group(0, video.prompt_ids, [Response([105, 106, 107]), Response([108, 109])]),
        Group(1, text.prompt_ids, [Response([110, 111, 112, 113]), Response([114])]),
    ]
    batch = collate(groups, pad_id=0)
    rows = [video, video, text, text]
    mask = batch.response_mask.float()
    gen = torch.Generator().manual_seed(0)
    old = (-3.0 + 0.3 * torch.randn(mask.shape, generator=gen)) * mask
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * mask
    return StepInputs(batch, old, adv), rows


class Single:
    """The reference: the same policy and optimizer in this process, no FSDP."""

    def __init__(self, path: Path) -> None:
        self.actor = ActorPolicy.from_pretrained(path)
        self.optimizer = build_optimizer(trainable_parameters(self.actor), OPT)

    def step(self, inputs: StepInputs, rows: list[Encoded]) -> tuple[float, dict[str, Any]]:
        """One update (as policy_step), returning the loss and the clipped gradients."""
        self.actor.train()
        self.actor.set_rows(rows)
        self.optimizer.zero_grad(set_to_none=True)
        result = accumulate_loss(
            self.actor, inputs, SETTINGS, norm=AggNorm.of(inputs.batch.response_mask)
        )
        params = [p for p in self.actor.parameters() if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        grads = {n: p.grad.clone() for n, p in self.actor.named_parameters() if p.grad is not None}
        self.optimizer.step()
        return result.loss, grads

    def state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.actor.state_dict().items()}


def _group(path: Path, **worker: Any) -> Any:
    from evalkit.trainer.distributed.group import GroupSpec, WorkerGroup
    from evalkit.trainer.distributed.worker import WorkerSpec

    spec = WorkerSpec(model_dir=str(path), optimizer=OPT, world_size=2, **worker)
    return WorkerGroup(GroupSpec(world_size=2, call_timeout_s=240), spec).start()


@pytest.fixture(scope="module")
def pair(tiny: Path, ray_local: Any) -> Iterator[tuple[Any, Single]]:
    """A 2-worker group and the single-process reference, starting from the same weights."""
    group = _group(tiny, keep_grads=True)
    yield group, Single(tiny)
    group.shutdown()


def _assert_close_states(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    worst = max(float((got[k] - want[k]).abs().max()) for k in want)
    assert worst < 1e-5, f"largest parameter difference {worst}"


@pytest.mark.heavy
@pytest.mark.timeout(400)
def test_two_workers_equal_one_process(pair: tuple[Any, Single]) -> None:
    group, single = pair
    inputs, rows = _inputs(single.actor)
    want_loss, want_grads = single.step(inputs, rows)
    result = group.update(inputs, rows, SETTINGS)  # balanced by tokens: a video row each
    assert abs(result.loss - want_loss) < 1e-5
    for grads in group.grads():
        assert sorted(grads) == sorted(want_grads)
        worst = max(float((grads[k] - want_grads[k]).abs().max()) for k in want_grads)
        assert worst < 1e-5, f"largest gradient difference {worst}"
    states = group.state_dicts()
    want = single.state()
    for state in states:
        _assert_close_states(state, want)
    vision = [k for k in want_grads if ".visual." in k]
    assert vision and any(float(want_grads[k].abs().max()) > 0 for k in vision)


@pytest.mark.heavy
@pytest.mark.timeout(400)
def test_text_rank_and_video_rank_make_the_same_vision_calls(pair: tuple[Any, Single]) -> None:
    group, single = pair
    inputs, rows = _inputs(single.actor)
    want_loss, _ = single.step(inputs, rows)
    # rank 0: the text group only; rank 1: the video group only
    result = group.update(inputs, rows, SETTINGS, parts=[[2, 3], [0, 1]])
    assert abs(result.loss - want_loss) < 1e-5
    text_trace, video_trace = group.traces()
    assert text_trace == ["image:dummy", "video:dummy"] * 2
    assert video_trace == ["image:dummy", "video"] * 2
    first, second = group.state_dicts()
    assert all(torch.equal(first[k], second[k]) for k in first)  # identical across ranks
    want = single.state()
    _assert_close_states(first, want)


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_without_the_dummy_a_modality_split_fails_instead_of_passing(
    tiny: Path, ray_local: Any
) -> None:
    from ray.exceptions import GetTimeoutError, RayError

    group = _group(tiny, dummy_mode="off", timeout_s=20.0)
    try:
        inputs, rows = _inputs(ActorPolicy.from_pretrained(tiny))
        group.spec = type(group.spec)(world_size=2, call_timeout_s=120)
        # rank 0 (text) skips the vision tower, rank 1 (video) calls it: unmatched collectives
        with pytest.raises((RayError, GetTimeoutError)) as caught:
            group.update(inputs, rows, SETTINGS, parts=[[2, 3], [0, 1]])
        print(f"detected: {type(caught.value).__name__}: {str(caught.value)[:300]}")
    finally:
        group.shutdown()


def _train(tiny: Path, data: Path, root: Path, steps: int, resume: bool) -> Any:
    """A distributed recipe run of ``steps`` (checkpoint every step) into ``root``."""
    from evalkit.trainer.config import load_config
    from evalkit.trainer.distributed.recipe import DistributedGRPORecipe

    overrides = [
        f"model={tiny}",
        f"data.train_path={data}",
        f"data.cache_root={root.parent / 'cache'}",
        "rollout.n=2",
        "rollout.max_response_tokens=8",
        "actor.entropy_coeff=0.01",  # a gradient at every step, whatever the rewards
        f"schedule.steps={steps}",
        "checkpoint.every=1",
        f"checkpoint.dir={root / 'ckpt'}",
    ]
    cfg = load_config("trainer/configs/grpo_synthvideo_ray2.yaml", overrides)
    recipe = DistributedGRPORecipe(cfg)
    recipe.setup(resume=resume)
    try:
        recipe.run()
        assert recipe.group is not None
        recipe.final_state = recipe.group.full_state()
    finally:
        recipe.cleanup()
    return recipe


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_distributed_recipe_trains_checkpoints_and_resumes_exactly(
    tiny: Path, ray_local: Any, tmp_path: Path
) -> None:
    import json

    from evalkit.synthvideo import generate, write_unified

    ann = generate(tmp_path / "sv", 2, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = write_unified(ann)
    straight = _train(tiny, data, tmp_path / "a", 2, resume=False)
    assert [h["step"] for h in straight.history] == [1, 2]
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert len([json.loads(x) for x in lines if '"step"' in x]) >= 2
    ckpt = tmp_path / "a" / "ckpt" / "step_00000002"
    saved = torch.load(ckpt / "model.pt", weights_only=True)
    want = straight.final_state
    # the driver's copy (rollout, checkpoint, export) holds exactly the workers' weights
    assert sorted(saved) == sorted(want)
    assert all(torch.equal(saved[k], want[k]) for k in want)
    assert (ckpt / "sharded" / ".metadata").is_file()
    first = torch.load(ckpt.with_name("step_00000001") / "model.pt", weights_only=True)
    assert any(not torch.equal(first[k], want[k]) for k in want)  # step 2 moved the weights
    _train(tiny, data, tmp_path / "b", 1, resume=False)
    resumed = _train(tiny, data, tmp_path / "b", 2, resume=True)
    assert [h["step"] for h in resumed.history] == [2]
    got = resumed.final_state
    assert all(torch.equal(got[k], want[k]) for k in want)  # stopped + resumed == straight


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_sharded_checkpoint_resumes_exactly(
    pair: tuple[Any, Single], tiny: Path, tmp_path: Path
) -> None:
    group, single = pair
    inputs, rows = _inputs(single.actor)
    group.update(inputs, rows, SETTINGS)  # weights and AdamW moments away from the start
    group.save(tmp_path / "sharded")
    group.update(inputs, rows, SETTINGS)
    uninterrupted = group.full_state()
    fresh = _group(tiny)
    try:
        before = fresh.full_state()
        assert any(not torch.equal(before[k], uninterrupted[k]) for k in before)
        fresh.load(tmp_path / "sharded")
        fresh.update(inputs, rows, SETTINGS)
        resumed = fresh.full_state()
    finally:
        fresh.shutdown()
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in uninterrupted)
