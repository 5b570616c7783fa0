"""A worker's learning-rate schedule without Ray: one in-process rank (world size 1, gloo).

The schedule advancing per optimizer step on the worker (``lr_step_per: optimizer_step``)
follows :func:`trainer.step.ppo_update` on one process; the sharded checkpoint restores the
schedule's position, and a checkpoint written without one leaves the schedule alone. The
2-rank, per-training-step case is in tests/test_trainer_distributed_features.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.algorithms.aggregation import AggNorm
from evalkit.trainer.config import OptimizerConfig
from evalkit.trainer.distributed.worker import PolicyWorker, RankInputs, WorkerSpec, _free_port
from evalkit.trainer.lr_schedule import build_scheduler
from evalkit.trainer.model_parts import trainable_parameters
from evalkit.trainer.step import StepSettings, build_optimizer, mini_batches, ppo_update
from tests.test_trainer_distributed import _inputs  # 2 groups: video rows, text rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")
COSINE = OptimizerConfig(
    lr=1e-4, weight_decay=0.0, grad_clip=1.0, lr_schedule="cosine", warmup_steps=1
)
SETTINGS = StepSettings(micro_batch_size=2, ppo_mini_batch_size=1)  # a group per update


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evalkit.tiny_checkpoint import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", "qwen2_5_vl", seed=0)


@pytest.fixture(scope="module")
def worker(tiny: Path) -> Iterator[PolicyWorker]:
    """Rank 0 of a world of 1, in this process; the process group left afterwards."""
    saved = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT")}
    spec = WorkerSpec(
        model_dir=str(tiny),
        optimizer=COSINE,
        world_size=1,
        master_port=_free_port(),
        timeout_s=60,
        schedule_steps=4,
        lr_step_per="optimizer_step",
    )
    policy = PolicyWorker()
    policy.setup(0, spec)
    yield policy
    policy.close()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _lr(worker: PolicyWorker) -> float:
    return float(worker.scheduler.get_last_lr()[0])


def _update(worker: PolicyWorker) -> None:
    """verl's per-mini-batch updates of one training step, as the group sends them."""
    inputs, rows = _inputs(worker.actor)
    for part in mini_batches(inputs, SETTINGS.ppo_mini_batch_size):
        picked = [rows[int(i)] for i in part.batch.row_index]
        part.batch.row_index = torch.arange(len(picked))
        norm = AggNorm.of(part.batch.response_mask, SETTINGS.agg_max_len, dp_size=1)
        worker.update(RankInputs(part, picked, norm), SETTINGS)


@pytest.mark.timeout(300)
def test_schedule_steps_per_update_like_one_process_and_resumes(
    worker: PolicyWorker, tiny: Path, tmp_path: Path
) -> None:
    single = ActorPolicy.from_pretrained(tiny)
    opt = build_optimizer(trainable_parameters(single), COSINE)
    sched = build_scheduler(opt, COSINE, 4)
    inputs, rows = _inputs(single)
    single.set_rows(rows)
    assert _lr(worker) == 0.0  # warmup: the first update runs at lr 0, as in verl
    _update(worker)  # two mini-batches: two optimizer steps, two schedule steps
    ppo_update(single, opt, inputs, SETTINGS, sched)
    assert _lr(worker) == pytest.approx(0.75e-4, abs=1e-12) == sched.get_last_lr()[0]
    got = worker.state_dict()
    want = single.state_dict()
    assert max(float((got[k] - want[k]).abs().max()) for k in want) < 1e-5
    worker.save(str(tmp_path / "with"))
    _update(worker)
    assert _lr(worker) == pytest.approx(0.0)  # the end of the 4-step cosine
    worker.load(str(tmp_path / "with"))
    assert _lr(worker) == pytest.approx(0.75e-4, abs=1e-12)
    assert worker.optimizer.param_groups[0]["lr"] == pytest.approx(0.75e-4, abs=1e-12)


@pytest.mark.timeout(120)
def test_checkpoint_without_a_schedule_leaves_the_schedule_alone(
    worker: PolicyWorker, tmp_path: Path
) -> None:
    from evalkit.trainer.distributed.sharded import load_sharded, save_sharded

    save_sharded(tmp_path / "old", worker.actor, worker.optimizer)  # as before schedules
    before = dict(worker.scheduler.state_dict())
    load_sharded(tmp_path / "old", worker.actor, worker.optimizer, worker.scheduler)
    assert worker.scheduler.state_dict() == before
