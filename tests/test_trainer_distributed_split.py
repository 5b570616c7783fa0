"""The driver's split of a batch across ranks, and the dp_size arithmetic, without Ray.

The data-parallel gradient is simulated exactly as FSDP forms it: each rank's gradient of
its own rows' loss (global denominators, ``dp_size`` factor), averaged over the ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evalkit.trainer.algorithms.aggregation import AggNorm
from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.distributed.balance import balanced_partitions, even_out
from evalkit.trainer.distributed.group import split_for_ranks
from evalkit.trainer.step import StepInputs, StepSettings, accumulate_loss
from tests._toy_rl import ToyPolicy


def _imbalance(weights: list[int], parts: list[list[int]]) -> float:
    """Heaviest part's weight over the mean part weight (1.0: perfectly balanced)."""
    loads = [sum(weights[i] for i in p) for p in parts]
    return max(loads) / (sum(loads) / len(loads))


def test_partitions_cover_every_row_once_with_sizes_one_apart() -> None:
    weights = [7, 3, 9, 1, 4, 4, 2]
    parts = balanced_partitions(weights, 3)
    assert sorted(i for p in parts for i in p) == list(range(7))
    assert sorted(len(p) for p in parts) == [2, 2, 3]
    assert all(p == sorted(p) for p in parts)
    assert balanced_partitions(weights, 3) == parts  # deterministic


def test_partitions_balance_tokens_under_the_size_cap() -> None:
    # heaviest first to the lightest part with room: 10|9, 8->B, 1->A, 1->A, 1->B
    parts = balanced_partitions([10, 9, 8, 1, 1, 1], 2)
    assert parts == [[0, 3, 4], [1, 2, 5]]  # 12 vs 18, the best equal-size split here
    assert _imbalance([10, 9, 8, 1, 1, 1], parts) == pytest.approx(18 / 15)
    # two long and two short rows: one long row per rank, not both on one
    assert balanced_partitions([100, 5, 90, 6], 2) == [[0, 1], [2, 3]]


def test_partitions_refuse_fewer_rows_than_ranks() -> None:
    with pytest.raises(ValueError, match="2 rows cannot fill 3 ranks"):
        balanced_partitions([1, 2], 3)
    assert even_out([[0, 1], [2]]) == [[0, 1], [2, None]]


def _inputs(lengths: list[int]) -> StepInputs:
    groups = [
        Group(g, [2, 3 + g], [Response([4 + (i + g) % 6] * n) for i, n in enumerate(lengths)])
        for g in range(1)
    ]
    batch = collate(groups, pad_id=0)
    mask = batch.response_mask.float()
    gen = torch.Generator().manual_seed(1)
    old = (-2.5 + 0.2 * torch.randn(mask.shape, generator=gen)) * mask
    adv = torch.linspace(-1, 1, len(lengths))[:, None] * mask
    return StepInputs(batch, old, adv)


def test_split_pads_short_ranks_with_zero_weight_fillers() -> None:
    inputs = _inputs([3, 1, 4, 2, 5])
    rows = ["p0", "p1", "p2", "p3", "p4"]
    shards = split_for_ranks(inputs, rows, 2)
    assert [len(s.index) for s in shards] == [3, 3]
    real = sorted(i for s in shards for i in s.index if i is not None)
    assert real == [0, 1, 2, 3, 4]
    for s in shards:
        assert s.inputs.batch.row_index.tolist() == list(range(3))
        for j, i in enumerate(s.index):
            if i is None:
                assert int(s.inputs.batch.response_mask[j].sum()) == 0
            else:
                assert s.rows[j] == rows[i]
                assert torch.equal(s.inputs.batch.response_ids[j], inputs.batch.response_ids[i])
    with pytest.raises(ValueError, match="must split the 5 rows"):
        split_for_ranks(inputs, rows, 2, parts=[[0, 1], [2, 3]])


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_ranks_averaged_gradient_equals_one_process(mode: str) -> None:
    inputs = _inputs([3, 1, 4, 2, 5])
    settings = StepSettings(loss_agg_mode=mode, micro_batch_size=2)
    torch.manual_seed(0)
    policy = ToyPolicy()
    policy.zero_grad()
    full = accumulate_loss(policy, inputs, settings)
    want = [p.grad.clone() for p in policy.parameters() if p.grad is not None]
    world = 2
    norm = AggNorm.of(inputs.batch.response_mask, settings.agg_max_len, dp_size=world)
    summed = [torch.zeros_like(g) for g in want]
    loss = 0.0
    for shard in split_for_ranks(inputs, [None] * 5, world):
        policy.zero_grad()
        loss += accumulate_loss(policy, shard.inputs, settings, norm=norm).loss
        for acc, p in zip(summed, policy.parameters(), strict=True):
            acc += p.grad
    assert loss / world == pytest.approx(full.loss, abs=1e-6)  # the worker's reported loss
    for acc, g in zip(summed, want, strict=True):
        torch.testing.assert_close(acc / world, g, rtol=1e-5, atol=1e-7)  # FSDP's average


def test_distributed_recipe_takes_kl_and_schedules_but_not_a_checkpoint_without_shards(
    tmp_path: Path,
) -> None:
    from evalkit.errors import ConfigError
    from evalkit.trainer.config import load_config
    from evalkit.trainer.distributed.recipe import DistributedGRPORecipe

    base = ["distributed.workers=2", f"checkpoint.dir={tmp_path / 'ckpt'}"]
    cfg = load_config("trainer/configs/grpo_synthvideo_ray2.yaml", base)
    assert cfg.distributed.workers == 2 and cfg.distributed.gpus_per_worker == 0
    assert cfg.distributed.init == "all_load"
    extra = [
        "algorithm.kl.estimator=k3",
        "optimizer.lr_schedule=cosine",
        "optimizer.warmup_steps=1",
    ]
    recipe = DistributedGRPORecipe(load_config(None, [*base, *extra]))  # refused before
    assert not recipe.ref_on_driver  # the workers hold the reference
    (tmp_path / "ckpt" / "step_00000003").mkdir(parents=True)
    with pytest.raises(ConfigError, match="has no sharded worker state"):
        DistributedGRPORecipe(cfg).setup(resume=True)
