"""Sharded checkpoints of the worker group: torch.distributed.checkpoint (DCP), per rank.

Each rank writes its own shards of the parameters and of the AdamW state (no gather, no
rank-0 memory peak) into one directory with a shared ``.metadata``; loading reshards, so a
checkpoint saved by N ranks loads into M. The learning-rate scheduler's small state (its
step count; the same on every rank) travels in the same checkpoint as a plain object.
Together with the driver's step/data/RNG files (:mod:`trainer.checkpoint`) this is what a
distributed run resumes from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn


def save_sharded(path: str | Path, model: nn.Module, optimizer: Any, scheduler: Any = None) -> None:
    """Write ``model`` and ``optimizer`` shards (and ``scheduler``'s state) under ``path``
    (a collective: every rank)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
    if scheduler is not None:
        state["sched"] = scheduler.state_dict()
    dcp.save(state, checkpoint_id=str(path))


def load_sharded(path: str | Path, model: nn.Module, optimizer: Any, scheduler: Any = None) -> None:
    """Load what :func:`save_sharded` wrote into ``model``, ``optimizer`` and ``scheduler``
    (every rank; a checkpoint written without a scheduler leaves ``scheduler`` as it is)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    if not (Path(path) / ".metadata").is_file():
        raise FileNotFoundError(f"{path}: no sharded checkpoint here (.metadata is missing)")
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
    with_sched = scheduler is not None and _has_key(path, "sched")
    if with_sched:
        state["sched"] = scheduler.state_dict()
    dcp.load(state, checkpoint_id=str(path))  # in place, into the tensors of model_sd/optim_sd
    set_state_dict(model, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd)
    if with_sched:  # after the optimizer: its param groups carry the same lr
        scheduler.load_state_dict(state["sched"])


def _has_key(path: str | Path, top: str) -> bool:
    """Whether the checkpoint at ``path`` holds entries under ``top`` (older ones: no sched)."""
    import torch.distributed.checkpoint as dcp

    meta = dcp.FileSystemReader(str(path)).read_metadata()
    return any(k == top or k.startswith(top + ".") for k in meta.state_dict_metadata)
