"""FSDP2 sharding of the policy: per vision block, the tower, per decoder layer, root last.

Each ``fully_shard`` unit all-gathers its parameters just before its forward and frees them
after, so peak memory holds one block's full weights at a time instead of the model's.
The units: every vision block, then the vision tower itself (patch embedding, merger,
Qwen3-VL's deepstack mergers), every decoder layer, and last the :class:`ActorPolicy` as
the root (embeddings, final norm, lm_head). The policy is the root, not the HF model,
because the modality guard's vision calls happen in ``ActorPolicy.forward`` before the HF
model's forward: FSDP2 requires the root's forward to run first. The padding-free path
(:mod:`trainer.packing`) and the per-prompt vision pre-encoding (:mod:`.lockstep`) run as
the ``body`` of that same forward, so the root's parameters (embeddings, final norm,
lm_head) are unsharded for them too; outside it they are DTensor shards ("mixed
torch.Tensor and DTensor" in the embedding).

Mixed precision: bf16 parameters for compute with fp32 gradient reduction on GPU (the
sharded master weights and the optimizer stay fp32); fp32 throughout on CPU, where gloo
reduces and bf16 matmuls are slow.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..model_parts import vision_tower


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The language model's decoder layers of a Qwen-VL model (``model.language_model``)."""
    inner: Any = getattr(model, "model", model)
    lm = getattr(inner, "language_model", inner)
    layers = getattr(lm, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"{type(model).__name__}: no decoder layers at model.language_model")
    return list(layers)


def mixed_precision(device_type: str) -> Any:
    """bf16 compute / fp32 reduce on GPU; fp32 (no casting) elsewhere."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if device_type == "cuda":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard_actor(actor: nn.Module, device_type: str = "cpu", offload: bool = False) -> list[str]:
    """``fully_shard`` the policy in place (units as in the module docstring).

    Returns the names of the units, root last, for logs and tests. ``offload`` keeps the
    sharded parameters in CPU memory between uses (FSDP2's CPUOffloadPolicy; GPU only).
    """
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    model: Any = actor.model
    kwargs: dict[str, Any] = {"mp_policy": mixed_precision(device_type)}
    kwargs["offload_policy"] = CPUOffloadPolicy() if offload else OffloadPolicy()
    units: list[str] = []
    tower = vision_tower(model)
    for i, block in enumerate(getattr(tower, "blocks", [])):
        fully_shard(block, **kwargs)
        units.append(f"visual.blocks.{i}")
    fully_shard(tower, **kwargs)
    units.append("visual")
    for i, layer in enumerate(decoder_layers(model)):
        fully_shard(layer, **kwargs)
        units.append(f"language_model.layers.{i}")
    fully_shard(actor, **kwargs)
    units.append("<root: policy>")
    return units


def full_state_dict(module: nn.Module, rank0_only: bool = False) -> dict[str, Tensor]:
    """The unsharded state dict on CPU (every rank, or only rank 0: the others get {})."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=rank0_only)
    state = get_model_state_dict(module, options=options)
    return {k: v.detach().cpu().clone() for k, v in state.items() if isinstance(v, Tensor)}


def local_tensor(x: Tensor) -> Tensor:
    """A DTensor's full value (a collective: every rank must call it), else ``x``."""
    full = getattr(x, "full_tensor", None)
    return full() if callable(full) else x
