"""The workers' FSDP2 features against one process, on a local Ray instance (2 gloo ranks).

Two worker groups, each checked against a single-process policy that steps in lockstep:

- group A (every rank loads the weights; gradient checkpointing on; a reference policy):
  a step with checkpointing equals the single process's step without it (loss, gradients),
  and the blocks really ran twice; a step with KL in the loss equals the single process's
  (loss, kl metric, parameters), the reference log-probs coming from the workers.
- group B (rank-0 init: only rank 0 reads the weights; cosine schedule with warmup): every
  rank starts with the checkpoint's weights and buffers (rotary inv_freq included), the
  reference too; three steps follow the single-process schedule (lr and parameters), and
  a sharded checkpoint restores the schedule's position.
- the recipe (first, before the groups exist): 3 steps of the ray2 config with KL and
  cosine + warmup on 2 workers follow the single-process recipe (loss, kl, lr, final
  weights), without the scheduler-order warning.

~30 s for the module on an idle 2-core box, minutes on a busy one (three Ray groups):
all heavy.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.algorithms.aggregation import AggNorm
from evalkit.trainer.config import OptimizerConfig
from evalkit.trainer.lr_schedule import build_scheduler, current_lr
from evalkit.trainer.model_parts import trainable_parameters
from evalkit.trainer.step import (
    StepInputs,
    StepResult,
    StepSettings,
    accumulate_loss,
    build_optimizer,
    compute_logprobs,
)
from evalkit.trainer.visual_inputs import Encoded
from tests._distributed import local_ray, tiny_model
from tests.test_trainer_distributed import _inputs  # 2 video rows, 2 text rows

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.heavy
CONSTANT = OptimizerConfig(lr=1e-4, weight_decay=0.0, grad_clip=1.0)
COSINE = OptimizerConfig(
    lr=1e-4, weight_decay=0.01, grad_clip=1.0, lr_schedule="cosine", warmup_steps=1
)
SCHEDULE_STEPS = 4  # factors 0 (warmup), 1, 0.75, 0.25 at schedule steps 0..3
PLAIN = StepSettings(micro_batch_size=1, grad_clip=1.0, loss_agg_mode="token-mean")
KL = StepSettings(
    micro_batch_size=1, grad_clip=1.0, loss_agg_mode="token-mean", kl_estimator="k3", kl_coef=0.5
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    # 6 logical slots on 2 cores: the two groups stay alive (idle) for the module, and the
    # recipe's own 2 workers must still find room whatever the order the tests run in
    with local_ray(num_cpus=6) as ray:
        yield ray


class Single:
    """The same policy, reference, optimizer and schedule in this process: no FSDP, no
    gradient checkpointing, weights read from disk."""

    def __init__(self, path: Path, opt: OptimizerConfig) -> None:
        self.actor = ActorPolicy.from_pretrained(path)
        self.ref = copy.deepcopy(self.actor).eval().requires_grad_(False)
        self.optimizer = build_optimizer(trainable_parameters(self.actor), opt)
        self.scheduler = build_scheduler(self.optimizer, opt, SCHEDULE_STEPS)

    def step(
        self, inputs: StepInputs, rows: list[Encoded], settings: StepSettings
    ) -> tuple[StepResult, dict[str, torch.Tensor]]:
        """One update (as policy_step, then the schedule), with the clipped gradients."""
        self.actor.train()
        self.actor.set_rows(rows)
        self.optimizer.zero_grad(set_to_none=True)
        norm = AggNorm.of(inputs.batch.response_mask)
        result = accumulate_loss(self.actor, inputs, settings, norm=norm)
        params = [p for p in self.actor.parameters() if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        grads = {n: p.grad.clone() for n, p in self.actor.named_parameters() if p.grad is not None}
        self.optimizer.step()
        self.scheduler.step()
        return result, grads

    def ref_logprobs(self, inputs: StepInputs, rows: list[Encoded]) -> torch.Tensor:
        self.ref.set_rows(rows)
        return compute_logprobs(self.ref, inputs.batch, 1)

    def state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.actor.state_dict().items()}


def _group(path: Path, opt: OptimizerConfig, **worker: Any) -> Any:
    from evalkit.trainer.distributed.group import GroupSpec, WorkerGroup
    from evalkit.trainer.distributed.worker import WorkerSpec

    spec = WorkerSpec(
        model_dir=str(path), optimizer=opt, world_size=2, schedule_steps=SCHEDULE_STEPS, **worker
    )
    return WorkerGroup(GroupSpec(world_size=2, call_timeout_s=240), spec).start()


@pytest.fixture(scope="module")
def group_a(tiny: Path, ray_local: Any) -> Iterator[tuple[Any, Single]]:
    """All ranks load; gradient checkpointing and a reference on the workers."""
    group = _group(tiny, CONSTANT, keep_grads=True, reference=True, gradient_checkpointing=True)
    yield group, Single(tiny, CONSTANT)
    group.shutdown()


@pytest.fixture(scope="module")
def group_b(tiny: Path, ray_local: Any) -> Iterator[tuple[Any, Single]]:
    """Rank-0 init, a reference, the cosine schedule with warmup."""
    group = _group(tiny, COSINE, init="rank0", reference=True)
    yield group, Single(tiny, COSINE)
    group.shutdown()


def _recipe_run(tiny: Path, data: Path, root: Path, workers: int) -> Any:
    """3 steps of the ray2 config with KL in the loss and a cosine schedule with warmup."""
    from evalkit.trainer.config import load_config
    from evalkit.trainer.distributed.recipe import DistributedGRPORecipe
    from evalkit.trainer.recipe import GRPORecipe

    overrides = [
        f"model={tiny}",
        f"data.train_path={data}",
        f"data.cache_root={root.parent / 'cache'}",
        "rollout.n=2",
        "rollout.max_response_tokens=8",
        "actor.entropy_coeff=0.01",  # a gradient at every step, whatever the rewards
        "algorithm.kl.estimator=k3",
        "algorithm.kl.coef=0.5",
        "optimizer.lr_schedule=cosine",
        "optimizer.warmup_steps=1",
        "schedule.steps=3",
        "checkpoint.every=3",
        f"checkpoint.dir={root / 'ckpt'}",
        f"distributed.workers={workers}",
    ]
    cfg = load_config("trainer/configs/grpo_synthvideo_ray2.yaml", overrides)
    recipe = DistributedGRPORecipe(cfg) if workers else GRPORecipe(cfg)
    recipe.setup(resume=False)
    try:
        recipe.run()
        recipe.final_state = recipe.actor.state_dict()  # the driver's copy: the workers'
    finally:
        recipe.cleanup()
    return recipe


@pytest.mark.timeout(900)
def test_recipe_with_kl_and_schedule_on_workers_follows_one_process(
    tiny: Path, ray_local: Any, tmp_path: Path
) -> None:
    import warnings

    from evalkit.synthvideo import generate, write_unified

    ann = generate(tmp_path / "sv", 2, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = write_unified(ann)
    single = _recipe_run(tiny, data, tmp_path / "one", 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = _recipe_run(tiny, data, tmp_path / "two", 2)
    assert not [w for w in caught if "lr_scheduler.step()" in str(w.message)]
    assert [h["lr"] for h in dist.history] == pytest.approx([0.0, 1e-4, 0.5e-4], abs=1e-12)
    assert dist.history[2]["kl"] > 0  # step 1 ran at lr 0; step 2 moved the policy
    for got, want in zip(dist.history, single.history, strict=True):
        for key in ("loss", "kl", "lr"):
            assert abs(got[key] - want[key]) < 1e-5, (got["step"], key)
    assert _worst(dist.final_state, single.final_state) < 1e-5
    assert (tmp_path / "two" / "ckpt" / "step_00000003" / "sharded" / ".metadata").is_file()


def _worst(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> float:
    assert sorted(got) == sorted(want)
    return max(float((got[k] - want[k]).abs().max()) for k in want)


def _count_decoder_forwards(worker: Any) -> None:
    """Count forward calls of decoder layer 0 on that worker, a recompute included (a
    pre-hook: the non-reentrant recompute stops early, before any forward post-hook)."""

    def install(self: Any) -> None:
        from evalkit.trainer.distributed.fsdp import decoder_layers

        self.forwards = 0

        def hook(*_: Any) -> None:
            self.forwards += 1

        decoder_layers(self.actor.model)[0].register_forward_pre_hook(hook)

    import ray

    ray.get(worker.__ray_call__.remote(install))


@pytest.mark.timeout(500)
def test_gradient_checkpointing_step_equals_the_step_without(group_a: tuple[Any, Single]) -> None:
    import ray

    group, single = group_a
    inputs, rows = _inputs(single.actor)
    want, want_grads = single.step(inputs, rows, PLAIN)  # no checkpointing here
    for w in group.workers:
        _count_decoder_forwards(w)
    got = group.update(inputs, rows, PLAIN)
    assert abs(got.loss - want.loss) < 1e-5
    for grads in group.grads():
        assert _worst(grads, want_grads) < 1e-5
    for state in group.state_dicts():
        assert _worst(state, single.state()) < 1e-5
    # 2 rows a rank, one per micro-batch: each forward once, then once more in the backward
    counts = ray.get([w.__ray_call__.remote(lambda self: self.forwards) for w in group.workers])
    assert counts == [4, 4]


@pytest.mark.timeout(500)
def test_kl_in_the_loss_on_two_workers_equals_one_process(group_a: tuple[Any, Single]) -> None:
    group, single = group_a
    inputs, rows = _inputs(single.actor)
    single.step(inputs, rows, PLAIN)  # move the policy away from the reference first
    group.update(inputs, rows, PLAIN)
    ref_logp = group.logprobs(inputs.batch, rows, 1, ref=True)
    want_ref = single.ref_logprobs(inputs, rows)
    assert float((ref_logp - want_ref).abs().max()) < 1e-5
    old_logp = group.logprobs(inputs.batch, rows, 1)
    moved = (old_logp - ref_logp).abs() * inputs.batch.response_mask
    assert float(moved.max()) > 1e-4  # the reference is frozen: the policy left it
    kl_inputs = StepInputs(inputs.batch, inputs.old_logp, inputs.advantages, ref_logp)
    want, _ = single.step(kl_inputs, rows, KL)
    got = group.update(kl_inputs, rows, KL)
    assert want.metrics["kl"] > 0
    assert abs(got.metrics["kl"] - want.metrics["kl"]) < 1e-5
    assert abs(got.loss - want.loss) < 1e-5
    for state in group.state_dicts():
        assert _worst(state, single.state()) < 1e-5


@pytest.mark.timeout(500)
def test_rank0_init_gives_every_rank_the_weights_and_buffers(group_b: tuple[Any, Single]) -> None:
    import ray

    group, single = group_b
    want = single.state()  # the checkpoint as every rank reads it under all_load
    for state in group.state_dicts():
        assert all(torch.equal(state[k], want[k]) for k in want) and sorted(state) == sorted(want)
    # non-persistent buffers (rotary inv_freq) are not in the state dict: meta init leaves
    # them uninitialised unless they are broadcast too
    buffers = {n: b.clone() for n, b in single.actor.named_buffers()}
    assert any("inv_freq" in n for n in buffers)

    def read(self: Any) -> list[dict[str, torch.Tensor]]:
        return [{n: b.clone() for n, b in p.named_buffers()} for p in (self.actor, self.ref)]

    for actor_bufs, ref_bufs in ray.get([w.__ray_call__.remote(read) for w in group.workers]):
        for got in (actor_bufs, ref_bufs):
            assert sorted(got) == sorted(buffers)
            assert all(torch.equal(got[n], buffers[n]) for n in buffers)
    inputs, rows = _inputs(single.actor)
    ref_logp = group.logprobs(inputs.batch, rows, 1, ref=True)
    assert float((ref_logp - single.ref_logprobs(inputs, rows)).abs().max()) < 1e-5


@pytest.mark.timeout(600)
def test_schedule_with_warmup_follows_one_process_and_resumes(
    group_b: tuple[Any, Single], tmp_path: Path
) -> None:
    group, single = group_b
    inputs, rows = _inputs(single.actor)
    lrs = []
    for step in range(3):
        lr = current_lr(single.optimizer)
        assert group.schedule_state()["_last_lr"] == [pytest.approx(lr, abs=1e-12)]
        lrs.append(lr)
        want, _ = single.step(inputs, rows, PLAIN)
        got = group.update(inputs, rows, PLAIN)
        group.step_schedule()  # lr_step_per: train_step, as the recipe does
        assert abs(got.loss - want.loss) < 1e-5
        for state in group.state_dicts():
            assert _worst(state, single.state()) < 1e-5, f"step {step + 1}"
        if step == 1:
            group.save(tmp_path / "sharded")
            after_two = single.state()
    assert lrs == pytest.approx([0.0, 1e-4, 0.75e-4], abs=1e-12)
    third = group.full_state()
    group.load(tmp_path / "sharded")  # back to after step 2: weights, AdamW and schedule
    assert group.schedule_state()["_last_lr"] == [pytest.approx(0.75e-4, abs=1e-12)]
    assert _worst(group.full_state(), after_two) < 1e-5
    group.update(inputs, rows, PLAIN)
    group.step_schedule()
    again = group.full_state()
    assert all(torch.equal(again[k], third[k]) for k in third)
