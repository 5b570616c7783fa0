"""Loss aggregation: per-token losses (B, T) to one scalar, by name from :data:`AGGREGATIONS`.

Gradient accumulation splits a mini-batch into micro-batches, and a mean computed inside
each micro-batch would weight tokens unequally (a micro-batch of short responses would count
as much as one of long responses). So the denominators come from the WHOLE mini-batch, in
:class:`AggNorm`: the sum over micro-batches of ``aggregate(...)`` equals the aggregate of
the full mini-batch, exactly.

The modes follow verl's ``agg_loss`` (verl/trainer/ppo/core_algos.py): sequences with no
valid token are left out of the sequence count, ``seq-mean-token-sum-norm`` sums over the
sequences without dividing by their number, and ``dp_size`` multiplies the token-mean,
seq-mean-token-sum and seq-mean-token-mean results because FSDP averages gradients over the
data-parallel ranks (each rank's denominators are global counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from evalkit.registry import Registry


@dataclass(frozen=True)
class AggNorm:
    """Denominators taken over the whole mini-batch."""

    total_tokens: float
    """Valid (mask = 1) response tokens in the mini-batch."""
    total_seqs: float
    """Sequences in the mini-batch with at least one valid token (verl leaves empty ones out)."""
    max_len: float = 1.0
    """Constant length divisor of seq-mean-token-sum-norm (the response budget)."""
    dp_size: float = 1.0
    """Data-parallel ranks whose gradients are averaged (verl multiplies by it); 1 here."""

    @classmethod
    def of(cls, mask: Tensor, max_len: float = 1.0, dp_size: float = 1.0) -> AggNorm:
        """Denominators of the mini-batch whose full response mask is ``mask``."""
        seqs = float((mask.sum(-1) > 0).sum())
        return cls(float(mask.sum()), seqs, float(max_len), float(dp_size))


AggregationFn = Callable[[Tensor, Tensor, AggNorm], Tensor]
DP_SCALED = frozenset({"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"})
"""Modes whose result verl multiplies by dp_size (a sum over ranks is dp times the loss)."""
AGGREGATIONS: Registry[AggregationFn] = Registry(
    "loss aggregation mode", group="evalkit.loss_aggregations"
)


def aggregate(mode: str, loss: Tensor, mask: Tensor, norm: AggNorm) -> Tensor:
    """Aggregate ``loss`` (B, T) over the tokens where ``mask`` is 1 with ``mode``."""
    return AGGREGATIONS.get(mode)(loss, mask.to(loss.dtype), norm)


@AGGREGATIONS("token-mean")
def token_mean(loss: Tensor, mask: Tensor, norm: AggNorm) -> Tensor:
    """dp * sum_{i,t} m_it L_it / N_tokens, N_tokens counted over the whole mini-batch."""
    return (loss * mask).sum() / max(norm.total_tokens, 1.0) * norm.dp_size


@AGGREGATIONS("seq-mean-token-mean")
def seq_mean_token_mean(loss: Tensor, mask: Tensor, norm: AggNorm) -> Tensor:
    """dp * (1/N_seqs) sum_i [ sum_t m_it L_it / sum_t m_it ]: each sequence weighs the same.

    N_seqs counts only sequences with a valid token (an empty response, e.g. cut at its first
    visual token, adds nothing and is not counted), as verl does.
    """
    per_seq = (loss * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return per_seq.sum() / max(norm.total_seqs, 1.0) * norm.dp_size


@AGGREGATIONS("seq-mean-token-sum")
def seq_mean_token_sum(loss: Tensor, mask: Tensor, norm: AggNorm) -> Tensor:
    """dp * (1/N_seqs) sum_i [ sum_t m_it L_it ]: each sequence's token sum, averaged over the
    sequences with a valid token (verl ``seq-mean-token-sum``; long responses weigh more)."""
    return (loss * mask).sum() / max(norm.total_seqs, 1.0) * norm.dp_size


@AGGREGATIONS("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(loss: Tensor, mask: Tensor, norm: AggNorm) -> Tensor:
    """sum_i [ sum_t m_it L_it ] / L_max with a constant L_max, NOT divided by N_seqs (verl).

    verl applies no dp_size factor to this mode either, so neither do we.
    """
    return (loss * mask).sum() / norm.max_len


@AGGREGATIONS("seq-mean-token-sum-norm-mean")
def seq_mean_token_sum_norm_mean(loss: Tensor, mask: Tensor, norm: AggNorm) -> Tensor:
    """(1/N_seqs) sum_i [ sum_t m_it L_it / L_max ]: seq-mean-token-sum-norm averaged over the
    sequences (evalkit's earlier definition; N_seqs times smaller than verl's)."""
    return (loss * mask).sum() / norm.max_len / max(norm.total_seqs, 1.0)
