"""Micro-batches by a token budget (``actor.use_dynamic_bsz``, ``actor.max_token_len_per_gpu``).

verl's dynamic batch size (``rearrange_micro_batches``) fills each micro-batch up to a token
budget instead of a fixed row count, so short sequences share a forward and long ones do
not overflow memory. Here rows stay in their order and each micro-batch is a consecutive
run of rows: concatenating the micro-batches' log-probs gives the batch's rows in order,
and since every loss denominator is global (:class:`trainer.algorithms.aggregation.AggNorm`)
the accumulated loss and gradient do not depend on where the cuts fall. Among partitions
into consecutive runs, the greedy cut used here needs the fewest micro-batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from .batch import TrainBatch


def token_budget_micro_batches(lengths: Sequence[int], budget: int) -> list[range]:
    """Consecutive runs of rows whose ``lengths`` sum to at most ``budget`` each.

    Every row lands in exactly one run, in order. A row longer than the budget on its own
    cannot be placed: that is an error naming the row, not a silent overflow.
    """
    if budget < 1:
        raise ValueError(f"token budget must be positive, got {budget}")
    runs: list[range] = []
    start, used = 0, 0
    for i, n in enumerate(lengths):
        if n > budget:
            raise ValueError(
                f"row {i} has {n} tokens, over actor.max_token_len_per_gpu={budget}; raise the "
                f"budget to at least {n} (the longest prompt + response)"
            )
        if used + n > budget:
            runs.append(range(start, i))
            start, used = i, 0
        used += n
    if start < len(lengths):
        runs.append(range(start, len(lengths)))
    return runs


def micro_batch_slices(batch: TrainBatch, size: int, max_token_len: int | None) -> list[slice]:
    """The micro-batches of ``batch``: ``size`` rows each, or by token budget when given.

    Tokens are counted as the model sees them padding-free (each row's attended tokens).
    """
    if max_token_len is None:
        return [slice(s, s + size) for s in range(0, len(batch), size)]
    lengths = batch.attention_mask.sum(1).tolist()
    return [slice(r.start, r.stop) for r in token_budget_micro_batches(lengths, max_token_len)]
