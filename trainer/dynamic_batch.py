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


def token_budget_micro_batches(
    lengths: Sequence[int], budget: int, min_count: int = 0
) -> list[range]:
    """Consecutive runs of rows whose ``lengths`` sum to at most ``budget`` each.

    Every row lands in exactly one run, in order. A row longer than the budget on its own
    cannot be placed: that is an error naming the row, not a silent overflow. ``min_count``
    asks for at least that many runs (the fullest run is halved until there are): under
    FSDP every rank must run the same number of micro-batches, so a data-parallel caller
    passes the largest count over its ranks (verl's ``rearrange_micro_batches`` all-reduces
    it with MAX for the same reason).
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
    return _split_to(runs, lengths, min_count) if len(runs) < min_count else runs


def _split_to(runs: list[range], lengths: Sequence[int], count: int) -> list[range]:
    """Halve the run with the most tokens (by tokens) until there are ``count`` runs."""
    if count > len(lengths):
        raise ValueError(f"cannot cut {len(lengths)} rows into {count} non-empty micro-batches")
    runs = list(runs)
    while len(runs) < count:
        k = max(
            (j for j, r in enumerate(runs) if len(r) > 1),
            key=lambda j: sum(lengths[i] for i in runs[j]),
        )
        run = runs[k]
        half, acc, cut = sum(lengths[i] for i in run) / 2, 0, run.start + 1
        for i in run[:-1]:  # cut after the row where the running sum reaches half
            acc += lengths[i]
            cut = i + 1
            if acc >= half:
                break
        runs[k : k + 1] = [range(run.start, cut), range(cut, run.stop)]
    return runs


def micro_batch_slices(
    batch: TrainBatch, size: int, max_token_len: int | None, min_count: int = 0
) -> list[slice]:
    """The micro-batches of ``batch``: ``size`` rows each, or by token budget when given.

    Tokens are counted as the model sees them padding-free (each row's attended tokens);
    ``min_count`` as in :func:`token_budget_micro_batches` (budget mode only).
    """
    if max_token_len is None:
        return [slice(s, s + size) for s in range(0, len(batch), size)]
    lengths = batch.attention_mask.sum(1).tolist()
    runs = token_budget_micro_batches(lengths, max_token_len, min_count)
    return [slice(r.start, r.stop) for r in runs]
