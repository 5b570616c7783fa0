"""A training checkpoint as a HF model directory that ``evalkit run --model OUT/`` evaluates.

``python -m evalkit.trainer export CKPT OUT/``: CKPT is a ``step_*`` directory or a
checkpoint folder (its newest step is taken). The architecture, tokenizer and processor come
from the base model the run started from (recorded in the checkpoint's meta as
``extra.model``; ``--model`` when it is missing or moved); the weights are the checkpoint's.
OUT gets config.json, generation_config.json, model.safetensors, the tokenizer files and
the processor's preprocessor configs, plus ``trainer_export.json`` (where it came from).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from evalkit.errors import ConfigError

from .checkpoint import latest_checkpoint


def resolve_checkpoint(path: str | Path) -> Path:
    """``path`` itself when it is a ``step_*`` directory, else its newest checkpoint."""
    path = Path(path)
    if (path / "meta.json").is_file():
        return path
    latest = latest_checkpoint(path)
    if latest is None:
        raise ConfigError(f"{path}: not a checkpoint (no meta.json) and holds no step_* checkpoint")
    return latest


def export_checkpoint(
    ckpt: str | Path, out: str | Path, model: str | None = None, dtype: str | None = None
) -> Path:
    """Write the HF-format model of ``ckpt`` into ``out`` (new or empty); returns ``out``."""
    from .actor import ActorPolicy

    path = resolve_checkpoint(ckpt)
    meta = json.loads((path / "meta.json").read_text())
    base = model or meta.get("extra", {}).get("model")
    if not base or not Path(base).is_dir():
        raise ConfigError(
            f"{path}: the base model directory {base!r} is unknown or gone; pass --model "
            "with the model the run trained (its architecture and processor are reused)"
        )
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: exists and is not empty; export into a new directory")
    actor = ActorPolicy.from_pretrained(base)
    state = torch.load(path / "model.pt", weights_only=True)
    try:
        actor.load_state_dict(state)
    except RuntimeError as exc:
        raise ConfigError(f"{path}: weights do not fit the model at {base}: {exc}") from exc
    hf_model: Any = actor.model
    if dtype is not None:
        hf_model.to(getattr(torch, dtype))
    out.mkdir(parents=True, exist_ok=True)
    hf_model.save_pretrained(out, safe_serialization=True)
    actor.processor.save_pretrained(out)
    record = {"checkpoint": str(path.resolve()), "step": meta.get("step"), "base_model": base}
    (out / "trainer_export.json").write_text(json.dumps(record, indent=2) + "\n")
    return out
