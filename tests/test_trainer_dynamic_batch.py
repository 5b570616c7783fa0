"""Micro-batches by a token budget (actor.use_dynamic_bsz): the packer and unchanged results."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch

from evalkit.trainer.config import load_config
from evalkit.trainer.dynamic_batch import micro_batch_slices, token_budget_micro_batches
from evalkit.trainer.step import StepSettings, accumulate_loss, compute_logprobs
from tests._toy_rl import ToyPolicy
from tests.test_trainer_step import _inputs  # the same two groups, old log-probs, advantages

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize(
    ("lengths", "budget", "want"),
    [
        ([3, 4, 2, 5, 1], 7, [[0, 1], [2, 3], [4]]),
        ([7, 7, 7], 7, [[0], [1], [2]]),
        ([1, 1, 1, 1], 100, [[0, 1, 2, 3]]),
        ([2, 6, 1, 1, 5], 7, [[0], [1, 2], [3, 4]]),
        ([], 5, []),
    ],
)
def test_budget_packer_cuts_consecutive_runs_greedily(lengths, budget, want):
    assert [list(r) for r in token_budget_micro_batches(lengths, budget)] == want


def test_budget_packer_respects_the_budget_and_keeps_order_and_coverage():
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        budget = int(torch.randint(8, 40, (), generator=gen))
        n = int(torch.randint(0, 30, (), generator=gen))
        lengths = torch.randint(1, budget + 1, (n,), generator=gen).tolist()
        runs = token_budget_micro_batches(lengths, budget)
        assert [i for r in runs for i in r] == list(range(n))  # every row once, in order
        assert all(len(r) > 0 and sum(lengths[i] for i in r) <= budget for r in runs)
        # greedy: no run could have taken the next run's first row
        for a, b in itertools.pairwise(runs):
            assert sum(lengths[i] for i in a) + lengths[b[0]] > budget


@pytest.mark.parametrize(
    ("lengths", "count", "want"),
    [
        ([3, 4, 2, 5, 1], 4, [[0], [1], [2, 3], [4]]),  # greedy gives 3; the fullest is halved
        ([1, 1, 1, 1], 2, [[0, 1], [2, 3]]),
        ([1, 1, 1, 1], 4, [[0], [1], [2], [3]]),
        ([3, 4, 2, 5, 1], 2, [[0, 1], [2, 3], [4]]),  # already more than asked: unchanged
    ],
)
def test_a_minimum_count_splits_runs_keeping_order(lengths, count, want):
    """Data-parallel ranks must run the same number of micro-batches (FSDP collectives)."""
    runs = token_budget_micro_batches(lengths, 7 if len(lengths) == 5 else 100, count)
    assert [list(r) for r in runs] == want


def test_more_micro_batches_than_rows_is_an_error():
    with pytest.raises(ValueError, match="cannot cut 2 rows into 3"):
        token_budget_micro_batches([1, 1], 10, min_count=3)


def test_a_row_over_the_budget_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"row 1 has 9 tokens, over actor.max_token_len_per_gpu=8"):
        token_budget_micro_batches([3, 9, 2], 8)


def test_slices_count_attended_tokens():
    inputs = _inputs(ToyPolicy())
    lengths = inputs.batch.attention_mask.sum(1).tolist()
    assert lengths == [4, 6, 3, 6, 4]
    parts = micro_batch_slices(inputs.batch, 2, max_token_len=10)
    assert [(s.start, s.stop) for s in parts] == [(0, 2), (2, 4), (4, 5)]  # 10, 3+6, 4
    assert micro_batch_slices(inputs.batch, 2, None) == [slice(0, 2), slice(2, 4), slice(4, 6)]


def test_dynamic_micro_batches_leave_logprobs_loss_and_gradient_unchanged():
    torch.manual_seed(0)
    policy = ToyPolicy()
    twin = copy.deepcopy(policy)
    inputs = _inputs(policy)
    fixed = StepSettings(micro_batch_size=5, kl_estimator="k3", kl_coef=0.1)
    dynamic = StepSettings(micro_batch_size=5, max_token_len=7, kl_estimator="k3", kl_coef=0.1)
    a = accumulate_loss(policy, inputs, fixed)
    b = accumulate_loss(twin, inputs, dynamic)
    assert b.loss == pytest.approx(a.loss, rel=1e-6)
    assert b.metrics == pytest.approx(a.metrics, rel=1e-5, abs=1e-7)
    for p, q in zip(policy.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(
        compute_logprobs(policy, inputs.batch, 5, max_token_len=7),
        compute_logprobs(policy, inputs.batch, 5),
        rtol=0,
        atol=0,
    )


def test_config_flags_reach_the_step_settings():
    cfg = load_config(None, ["actor.use_dynamic_bsz=true", "actor.max_token_len_per_gpu=4096"])
    assert StepSettings.from_config(cfg).max_token_len == 4096
    assert cfg.actor.padding_free is False  # off by default
    off = load_config(None, ["actor.max_token_len_per_gpu=4096"])
    assert StepSettings.from_config(off).max_token_len is None  # budget kept, switch off
    with pytest.raises(Exception, match="max_token_len_per_gpu"):
        load_config(None, ["actor.use_dynamic_bsz=true"])
