"""Token entropy of the policy over response tokens, from the log-softmax the loss already has.

H_t = -sum_v p_v log p_v. The full (B, T, V) log-softmax exists anyway (the gather of the
sampled tokens' log-probs needs it); entropy is computed from it in chunks of rows so that
the extra memory is one chunk's (rows, V), never a second (B, T, V) tensor. With gradient
(an entropy bonus in the loss) each chunk is checkpointed: backward recomputes its p log p
instead of keeping it (verl's ``entropy_from_logits_with_chunking`` + entropy checkpointing).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .batch import PolicyFn, TrainBatch, packed_path, response_log_softmax

CHUNK_ROWS = 512
"""Token rows per entropy chunk (each chunk allocates rows x vocab floats)."""


def _chunk_entropy(logp: Tensor) -> Tensor:
    return -(logp.exp() * logp).sum(-1)


def token_entropy(logp: Tensor, grad: bool = False, chunk: int = CHUNK_ROWS) -> Tensor:
    """Entropy (B, T) of the distributions whose log-softmax is ``logp`` (B, T, V)."""
    flat = logp.reshape(-1, logp.shape[-1])
    parts = []
    for part in flat.split(chunk):
        if grad and part.requires_grad:
            parts.append(checkpoint(_chunk_entropy, part, use_reentrant=False))
        else:
            with torch.no_grad():
                parts.append(_chunk_entropy(part.detach()))
    return torch.cat(parts).reshape(logp.shape[:-1])


def logprobs_and_entropy(
    policy: PolicyFn, batch: TrainBatch, temperature: float = 1.0, entropy_grad: bool = False
) -> tuple[Tensor, Tensor]:
    """Response log-probs (B, T), as :func:`trainer.batch.response_logprobs`, and entropies."""
    packed = packed_path(policy)
    if packed is not None:  # padding-free: both from one chunked pass (trainer.packing)
        logp, entropy = packed(batch, temperature, entropy_grad)
        return logp, entropy
    full = response_log_softmax(policy, batch, temperature)
    logp = full.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    return logp, token_entropy(full, grad=entropy_grad)


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over the tokens where ``mask`` is 1 (0 when there are none)."""
    return (values * mask).sum() / mask.sum().clamp(min=1)
