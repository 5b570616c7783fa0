"""The run's model and data: present, built on demand (announced), or refused up front.

A config found by name runs from any folder: its relative paths start at the current one.
Before any model loads, :func:`prepare_inputs` checks ``model``, ``data.train_path`` and (when
validation is on) ``data.val_path``. A missing one is built when ``inputs`` says how (the
tiny model of ``evalkit model tiny``; SynthVideo as ``evalkit synth --unified`` writes it, or
with offline trajectories), else refused with one line naming the path and the command that
makes it (``inputs.get_model`` / ``inputs.get_data``), instead of a loader's traceback later.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import ConfigError
from evalkit.registry import Registry
from evalkit.synthvideo.offline import FAMILIES as OFFLINE_FAMILIES

from .config import TrainerConfig

SYNTH_NAME = re.compile(r"^synthvideo_(train|test)\.(unified|offline)\.jsonl$")
"""The files :data:`SYNTH_KINDS` make: split, then the kind's name."""


@dataclass(frozen=True)
class SynthKind:
    """One kind of SynthVideo training file: which families, how it is written from the
    annotation file, and the command a person would run for it."""

    write: Callable[[Path, int], Path]
    how: str
    families: tuple[str, ...] | None = None
    """None: every family."""


def _unified(annotation: Path, seed: int) -> Path:
    from evalkit.synthvideo import write_unified

    return write_unified(annotation)


def _offline(annotation: Path, seed: int) -> Path:
    from evalkit.synthvideo.offline import write_offline

    return write_offline(annotation, seed=seed)


SYNTH_KINDS: Registry[SynthKind] = Registry("SynthVideo training file")
SYNTH_KINDS.register("unified", SynthKind(_unified, "evalkit synth --split {split} --unified"))
# offline trajectories need a wrong-answer rule: the families evalkit.synthvideo.offline has one for
SYNTH_KINDS.register(
    "offline",
    SynthKind(
        _offline,
        "evalkit synth --split {split}, then evalkit.synthvideo.offline.write_offline",
        OFFLINE_FAMILIES,
    ),
)


def announce(text: str) -> None:
    """One line on stderr: what the trainer builds for the run."""
    print(f"trainer: {text}", file=sys.stderr, flush=True)


def prepare_inputs(cfg: TrainerConfig) -> None:
    """Build or refuse every missing input of ``cfg`` (module docstring)."""
    _model(cfg)
    run = cfg.trainer
    files = [("data.train_path", cfg.data.train_path)]
    if cfg.data.val_path and (run.val_before_train or run.val_freq):
        files.append(("data.val_path", cfg.data.val_path))
    for key, path in files:
        _data_file(cfg, key, path)


def _model(cfg: TrainerConfig) -> None:
    how = cfg.inputs.get_model or "set model=PATH (a local Hugging Face checkpoint folder)"
    if not cfg.model:
        raise ConfigError(f"model is not set; {how}")
    model = Path(cfg.model)
    if model.exists():
        return
    family = cfg.inputs.tiny_model
    if family is None:
        raise ConfigError(f"model {cfg.model}: no such folder (from {Path.cwd()}); {how}")
    from evalkit.tiny_checkpoint import build_tiny_model

    announce(f"model {model} not found: building it (evalkit model tiny --family {family})")
    build_tiny_model(model, family=family, seed=cfg.seed)


def _data_file(cfg: TrainerConfig, key: str, name: str) -> None:
    how = cfg.inputs.get_data or f"set {key}=FILE (unified-schema JSONL)"
    if not name:
        raise ConfigError(f"{key} is not set; {how}")
    path = Path(name)
    if path.is_file():
        return
    match = SYNTH_NAME.match(path.name)
    n = cfg.inputs.synthvideo_n
    if n is None or match is None:
        if n is not None:  # asked to build, but not a file it knows how to make
            how = f"inputs.synthvideo_n makes synthvideo_<train|test>.unified.jsonl only; {how}"
        raise ConfigError(f"{key} {path}: no such file (from {Path.cwd()}); {how}")
    from evalkit.synthvideo import generate

    split, kind = match.groups()
    synth = SYNTH_KINDS.get(kind)
    announce(
        f"{key} {path} not found: generating SynthVideo {split} there "
        f"({n} per family, seed {cfg.seed}; {synth.how.format(split=split)})"
    )
    annotation = generate(path.parent, n, split, cfg.seed, families=synth.families)
    synth.write(annotation, cfg.seed)
