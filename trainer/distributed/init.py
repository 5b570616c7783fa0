"""How each rank gets its policy: every rank reads the checkpoint, or only rank 0 does.

``all_load`` (the default): every rank loads the weights from disk, then shards them; simple,
but N ranks hold N full copies in host memory at once, and N readers hit the disk.

``rank0``: only rank 0 reads the weights; the others build the same architecture on the
meta device (no memory), shard it like rank 0, give the shards real but uninitialised
storage (``to_empty``) and receive their slices of rank 0's full state dict by broadcast
(``set_model_state_dict(..., full_state_dict=True, broadcast_from_rank0=True)``, the
pattern torchtune and torchtitan use for large models).

Non-persistent buffers are not in a state dict, so the broadcast leaves them as ``to_empty``
left them (garbage): the rotary ``inv_freq`` / ``original_inv_freq`` of the text model and
the vision tower are such buffers. FSDP2 does not shard buffers, so every rank holds them
whole and :func:`broadcast_buffers` copies rank 0's over them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from torch import nn

if TYPE_CHECKING:
    from ..actor import ActorPolicy

InitMode = Literal["all_load", "rank0"]


def load_policy(model_dir: str | Path, rank: int, init: InitMode) -> ActorPolicy:
    """The unsharded policy of this rank: read from disk, or (``rank0`` mode, ranks > 0)
    built on the meta device from the model's config (processor files are still read)."""
    from ..actor import ActorPolicy

    if init == "all_load" or rank == 0:
        return ActorPolicy.from_pretrained(model_dir)
    if init != "rank0":
        raise ValueError(f"distributed.init must be all_load or rank0, got {init!r}")
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    from evalkit.engines.family import trainable_family

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(
            config, dtype=torch.float32, attn_implementation="sdpa"
        )
    return ActorPolicy(model, AutoProcessor.from_pretrained(model_dir), trainable_family(model_dir))


def on_meta(module: nn.Module) -> bool:
    """Whether any parameter or buffer of ``module`` lives on the meta device."""
    tensors = [*module.parameters(), *module.buffers()]
    return any(t.device.type == "meta" for t in tensors)


def source_state(module: nn.Module, rank: int) -> dict[str, torch.Tensor]:
    """Rank 0's full state dict, taken BEFORE sharding (afterwards it is DTensors whose
    gathering is a collective); {} on the other ranks."""
    if rank != 0:
        return {}
    return {k: v.detach() for k, v in module.state_dict().items()}


def broadcast_from_rank0(
    module: nn.Module, source: dict[str, torch.Tensor], device: torch.device
) -> None:
    """Fill every rank's shards of the already sharded ``module`` with rank 0's ``source``
    (:func:`source_state`), then its buffers (a collective: every rank calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if on_meta(module):
        module.to_empty(device=device)  # real storage for the shards; values come next
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(module, dict(source), options=options)
    broadcast_buffers(module)


def broadcast_buffers(module: nn.Module) -> None:
    """Copy rank 0's value of every buffer of ``module`` onto the other ranks."""
    import torch.distributed as dist

    for _, buf in sorted(module.named_buffers()):
        dist.broadcast(buf.data, src=0)


def prepare_policies(
    actor: ActorPolicy,
    rank: int,
    device: torch.device,
    *,
    init: InitMode = "all_load",
    reference: bool = False,
    ref_offload: bool = False,
    gradient_checkpointing: bool = False,
) -> tuple[list[str], ActorPolicy | None]:
    """Shard the rank's ``actor`` in place and build its reference when ``reference``
    (the options are :class:`.worker.WorkerSpec`'s fields of the same names).

    Order matters: the reference is copied before activation checkpointing is switched on
    (it never trains) and before sharding (a sharded module is not deep-copied); rank 0's
    full weights are taken before sharding too, for the ``rank0`` broadcast afterwards.
    Returns the actor's FSDP units, root last, and the reference (or None).
    """
    from ..model_parts import enable_gradient_checkpointing
    from .fsdp import shard_actor
    from .reference import frozen_copy

    source = source_state(actor, rank) if init == "rank0" else {}
    ref = frozen_copy(actor) if reference else None
    if gradient_checkpointing:
        enable_gradient_checkpointing(actor.model)
    units = shard_actor(actor, device.type)
    if ref is not None:
        shard_actor(ref, device.type, offload=ref_offload and device.type == "cuda")
    if init == "rank0":
        broadcast_from_rank0(actor, source, device)
        if ref is not None:  # the reference starts from the same weights
            broadcast_from_rank0(ref, source, device)
    return units, ref
