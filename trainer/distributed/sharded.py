"""Sharded checkpoints of the worker group: torch.distributed.checkpoint (DCP), per rank.

Each rank writes its own shards of the parameters and of the AdamW state (no gather, no
rank-0 memory peak) into one directory with a shared ``.metadata``; loading reshards, so a
checkpoint saved by N ranks loads into M. Together with the driver's step/data/RNG files
(:mod:`trainer.checkpoint`) this is what a distributed run resumes from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn


def save_sharded(path: str | Path, model: nn.Module, optimizer: Any) -> None:
    """Write ``model`` and ``optimizer`` shards under ``path`` (a collective: every rank)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(path))


def load_sharded(path: str | Path, model: nn.Module, optimizer: Any) -> None:
    """Load what :func:`save_sharded` wrote into ``model`` and ``optimizer`` (every rank)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    if not (Path(path) / ".metadata").is_file():
        raise FileNotFoundError(f"{path}: no sharded checkpoint here (.metadata is missing)")
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(path))  # in place, into the tensors of model_sd/optim_sd
    set_state_dict(model, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd)
