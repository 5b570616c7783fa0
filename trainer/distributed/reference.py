"""The frozen reference policy of a rank (KL against the starting weights).

Each rank holds a copy of the policy taken before training, sharded with the same FSDP2
units as the actor (:func:`.fsdp.shard_actor`: the all-gathers pair up the same way on
every rank), with no gradient and no optimizer; on GPU its shards can live in CPU memory
between uses (``distributed.ref_offload``). It computes the reference log-probs of the
rank's rows; the driver's KL path (in the loss or in the reward) uses them as it uses the
single-process reference's.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..actor import ActorPolicy


def frozen_copy(actor: ActorPolicy) -> ActorPolicy:
    """A deep copy of the (unsharded) ``actor`` in eval mode without gradients, sharing
    its prompt loader (the frames cache handle is not copied)."""
    loader, actor.loader = actor.loader, None
    try:
        ref = copy.deepcopy(actor)
    finally:
        actor.loader = loader
    ref.loader = loader
    return ref.eval().requires_grad_(False)
