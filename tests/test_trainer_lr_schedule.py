"""Learning-rate warmup and schedules: verl's formulas, stepping, and exact resume."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from evalkit.trainer import checkpoint as ckpt
from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.config import OptimizerConfig, load_config
from evalkit.trainer.lr_schedule import build_scheduler, lr_factor, schedule_length, warmup_steps
from evalkit.trainer.step import StepSettings
from tests._toy_rl import ToyRun

SETTINGS = StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=3)
COSINE = OptimizerConfig(lr=0.02, lr_schedule="cosine", warmup_steps=2, min_lr_ratio=0.1)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_cosine_factors_are_verls_formula_by_hand():
    # verl get_cosine_schedule_with_warmup, W=2, K=6, m=0.1: warmup k/W, then
    # max(0, cos(pi * p) * (1-m)/2 + (1+m)/2), p = (k-2)/4
    f = lr_factor("cosine", warmup=2, total=6, min_ratio=0.1)
    c = math.cos(math.pi / 4)
    expected = [0.0, 0.5, 1.0, 0.45 * c + 0.55, 0.55, -0.45 * c + 0.55]
    assert [f(k) for k in range(6)] == pytest.approx(expected, abs=1e-12)
    assert f(6) == pytest.approx(0.1)  # the floor at the last step


def test_constant_schedule_warms_up_then_holds():
    f = lr_factor("constant", warmup=4, total=100, min_ratio=0.5)
    assert [f(k) for k in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]


def test_no_warmup_constant_leaves_the_learning_rate_untouched():
    policy = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(policy.parameters(), lr=0.3)
    sched = build_scheduler(opt, OptimizerConfig(lr=0.3), total=5)
    for _ in range(5):
        assert opt.param_groups[0]["lr"] == 0.3
        opt.step()
        sched.step()


def test_warmup_ratio_and_length_per_optimizer_step():
    assert warmup_steps(OptimizerConfig(warmup_ratio=0.1), 50) == 5
    assert warmup_steps(OptimizerConfig(warmup_steps=3, warmup_ratio=0.5), 50) == 3
    cfg = load_config(
        None,
        [
            "schedule.steps=10",
            "schedule.batch_size=4",
            "schedule.ppo_mini_batch_size=2",
            "schedule.ppo_epochs=3",
        ],
    )
    assert schedule_length(cfg) == 10
    per_update = cfg.model_copy(
        update={"optimizer": cfg.optimizer.model_copy(update={"lr_step_per": "optimizer_step"})}
    )
    assert schedule_length(per_update) == 10 * 3 * 2


def test_the_toy_run_follows_the_schedule():
    run = ToyRun(SETTINGS, seed=1, lr_schedule=COSINE, schedule_steps=6)
    seen = []
    for _ in range(4):
        seen.append(run.optimizer.param_groups[0]["lr"])
        run.step()
    assert seen == pytest.approx([0.0, 0.01, 0.02, 0.02 * (0.45 * math.cos(math.pi / 4) + 0.55)])


def _losses(run, steps):
    return [[(r.loss, r.metrics) for r in run.step()] for _ in range(steps)]


def _saved(root):
    run = ToyRun(SETTINGS, seed=3, lr_schedule=COSINE, schedule_steps=8)
    _losses(run, 3)
    path = ckpt.save_checkpoint(
        root, 3, run.policy, run.optimizer, run.data_state(), scheduler=run.scheduler
    )
    return run, path


def test_resume_restores_the_schedule_exactly(tmp_path):
    run, path = _saved(tmp_path)
    expected = _losses(run, 4)  # through the cosine part of the schedule
    random.random(), np.random.rand(), torch.rand(3)
    fresh = ToyRun(SETTINGS, seed=99, lr_schedule=COSINE, schedule_steps=8)
    state = ckpt.load_checkpoint(path, fresh.policy, fresh.optimizer, scheduler=fresh.scheduler)
    fresh.load_data_state(state.data_state)
    assert fresh.scheduler is not None and fresh.scheduler.last_epoch == 3
    assert _losses(fresh, 4) == expected
    assert (path / "scheduler.pt").is_file()


def test_resume_without_the_scheduler_state_diverges(tmp_path):
    # guards the test above: the schedule position is what the scheduler file restores
    run, path = _saved(tmp_path)
    expected = _losses(run, 4)
    fresh = ToyRun(SETTINGS, seed=99, lr_schedule=COSINE, schedule_steps=8)
    state = ckpt.load_checkpoint(path, fresh.policy, fresh.optimizer)
    fresh.load_data_state(state.data_state)
    assert _losses(fresh, 4) != expected


def test_per_optimizer_step_the_schedule_advances_after_every_update():
    from dataclasses import replace

    from evalkit.trainer.algorithms.advantages import AdvantageInputs, compute_advantages
    from evalkit.trainer.step import StepInputs, compute_logprobs, ppo_update

    run = ToyRun(SETTINGS, seed=2, prompts_per_step=4)
    sched = build_scheduler(run.optimizer, COSINE, total=12)
    batch, rewards = run.rollout()
    adv = compute_advantages("grpo", AdvantageInputs(rewards, batch.group_ids, batch.response_mask))
    old = compute_logprobs(run.policy, batch, 64)
    settings = replace(SETTINGS, ppo_epochs=2, ppo_mini_batch_size=2)  # 2 x 2 updates
    lrs = []

    class Noting:  # the lr each optimizer step used, read just before the schedule moves
        def step(self):
            lrs.append(run.optimizer.param_groups[0]["lr"])
            sched.step()

    inputs = StepInputs(batch, old, adv, old.clone())
    ppo_update(run.policy, run.optimizer, inputs, settings, Noting())
    assert sched.last_epoch == 4
    assert lrs == pytest.approx([0.0, 0.01, 0.02, 0.02 * (0.45 * math.cos(math.pi / 10) + 0.55)])
