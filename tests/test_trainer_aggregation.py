"""Loss aggregation modes; global denominators make micro-batching exact."""

from __future__ import annotations

import pytest
import torch

from evalkit.trainer.algorithms.aggregation import AGGREGATIONS, AggNorm, aggregate

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0]])
MODES = [
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
    "seq-mean-token-sum-norm-mean",
]


def test_registry_holds_the_modes():
    assert set(MODES) <= set(AGGREGATIONS)


def test_token_mean_weighs_every_valid_token_the_same():
    assert aggregate("token-mean", LOSS, MASK, AggNorm.of(MASK)).item() == pytest.approx(2.5)


def test_seq_mean_token_mean_weighs_every_sequence_the_same():
    assert aggregate("seq-mean-token-mean", LOSS, MASK, AggNorm.of(MASK)).item() == 3.0


def test_seq_mean_token_sum_norm_divides_by_a_constant_length():
    norm = AggNorm.of(MASK, max_len=4)
    # verl: (6 + 4) / 4, not divided by the 2 sequences; the -mean variant divides
    assert aggregate("seq-mean-token-sum-norm", LOSS, MASK, norm).item() == 2.5
    assert aggregate("seq-mean-token-sum-norm-mean", LOSS, MASK, norm).item() == 1.25


@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_with_global_denominators_sum_to_the_full_batch(mode):
    gen = torch.Generator().manual_seed(0)
    loss = torch.randn(5, 7, generator=gen)
    lengths = torch.tensor([7, 1, 3, 6, 2])
    mask = (torch.arange(7)[None, :] < lengths[:, None]).long()
    norm = AggNorm.of(mask, max_len=7)
    full = aggregate(mode, loss, mask, norm)
    parts = sum(
        aggregate(mode, loss[s], mask[s], norm) for s in (slice(0, 2), slice(2, 4), slice(4, 5))
    )
    torch.testing.assert_close(parts, full)


def test_per_micro_batch_token_means_would_be_wrong():
    # the reason for global denominators: averaging micro-batch means over-weights short rows
    norm_local = [AggNorm.of(MASK[i : i + 1]) for i in range(2)]
    local = sum(
        aggregate("token-mean", LOSS[i : i + 1], MASK[i : i + 1], norm_local[i]) for i in range(2)
    )
    assert local / 2 != pytest.approx(2.5)
