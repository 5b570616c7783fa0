"""Every rank's collectives in lockstep where the count would depend on the rank's rows.

Under per-block FSDP2 a forward is a fixed sequence of all-gathers (the root, the vision
tower and its blocks per tower call, every decoder layer) and, with gradient, of
reduce-scatters; collectives pair up by their order in the process group, so every rank
must make the same sequence or the group hangs until its timeout. The modality guard
(:meth:`trainer.actor.ActorPolicy.vision_features`) fixes the tower calls of one forward.
Two more counts depend on a rank's own rows:

- **Micro-batches under a token budget** (``actor.use_dynamic_bsz``): a rank with long rows
  needs more micro-batches than one with short rows. :func:`agreed_micro_batches`
  all-reduces the largest count and every rank cuts that many
  (:func:`trainer.dynamic_batch.token_budget_micro_batches` ``min_count``), as verl's
  ``rearrange_micro_batches`` does with its all-reduce MAX.
- **Vision encoded once per prompt** (:mod:`trainer.shared_vision`, no-gradient passes): a
  rank whose rows hold three prompts would call the tower three times, one with a single
  prompt once. :func:`lockstep_vision` encodes every prompt of the rank's pass up front, in
  ONE root forward, with the number of tower calls agreed BEFORE the first one (all-reduce
  MAX; the short ranks top up with dummy calls, whose outputs are dropped: without
  gradient they carry nothing). The micro-batch forwards then take every feature from the
  cache and make no tower call at all (dummies off for the pass), on every rank alike.

Both agreements are one small all-reduce each, made before the collectives they govern.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from ..dynamic_batch import micro_batch_slices
from ..shared_vision import ENCODERS

if TYPE_CHECKING:
    from ..actor import ActorPolicy
    from ..batch import TrainBatch
    from ..visual_inputs import Encoded


def agreed_max(count: int, device: torch.device) -> int:
    """The largest ``count`` over the ranks (a collective: every rank calls it)."""
    import torch.distributed as dist

    value = torch.tensor([count], dtype=torch.long, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return int(value.item())


def agreed_micro_batches(
    batch: TrainBatch, size: int, max_token_len: int | None, device: torch.device
) -> int:
    """How many micro-batches every rank runs (0: no budget, equal row counts suffice).

    Without a token budget every rank cuts its (equal-length, :func:`.balance.even_out`)
    shard into ``size`` rows each, so the counts already agree and no collective is made.
    """
    if max_token_len is None:
        return 0
    own = len(micro_batch_slices(batch, size, max_token_len))
    return agreed_max(own, device)


def _slots(keys: list[Any], rows: list[Encoded]) -> int:
    """Tower calls the vision cache makes for these rows: distinct (prompt, kind) pairs."""
    return len(
        {
            (id(key), kind)
            for key, row in zip(keys, rows, strict=True)
            for kind, (pix, _, _) in ENCODERS.items()
            if pix in row.visual
        }
    )


def _encode_all(
    actor: ActorPolicy, keys: list[Any], rows: list[Encoded], device: torch.device, calls: int
) -> None:
    """The body of the pre-encoding root forward: every prompt's features, then dummies."""
    visuals = [{k: v.to(device) for k, v in row.visual.items()} for row in rows]
    cache = actor.vision_cache
    before = cache.encoded
    cache.encoder_outputs(actor.model, keys, visuals)
    made = cache.encoded - before
    actor.vision_trace.extend(["shared"] * made)
    for _ in range(calls - made):  # the same tower collectives as a real call; output unused
        actor.dummy_visual("image")
        actor.vision_trace.append("shared:dummy")


@contextmanager
def lockstep_vision(actor: ActorPolicy, batch: TrainBatch) -> Iterator[None]:
    """A no-gradient pass over ``batch`` with vision encoded once per prompt on every rank.

    Inside: the features of every prompt of ``batch`` are cached (one scope), the agreed
    number of tower calls has been made, and the forwards make none (dummy calls off).
    Outside ``torch.no_grad``, or with ``share_vision_per_group`` off, nothing changes (the
    modality guard's two calls per forward keep the ranks paired).
    """
    if not actor.share_vision_per_group or torch.is_grad_enabled():
        yield
        return
    device = batch.input_ids.device
    keys, rows = actor.batch_rows(batch)
    calls = agreed_max(_slots(keys, rows), device)
    with actor.vision_cache.scope():
        # inside the FSDP root's forward, as every other tower call
        actor(body=functools.partial(_encode_all, actor, keys, rows, device, calls))
        mode, actor.dummy_mode = actor.dummy_mode, "off"
        try:
            yield
        finally:
            actor.dummy_mode = mode
