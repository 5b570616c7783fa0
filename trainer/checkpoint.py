"""Checkpoints that resume exactly: model, optimizer, RNG states, step and data position.

Layout: ``<dir>/step_00000042/{model.pt, optimizer.pt, rng.pt, meta.json}``, plus
``scheduler.pt`` when the run has a learning-rate schedule. A checkpoint is
written into a hidden temporary directory beside it, every file fsync'd, then renamed into
place in one step, so a crash never leaves a half-written ``step_*`` directory; a reader
only ever lists complete ones. Files are loaded with ``weights_only=True`` (no pickle code).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from evalkit.atomic import fsync_dir

log = logging.getLogger(__name__)
FORMAT_VERSION = 1
_PREFIX = "step_"


@dataclass
class Resumed:
    """What :func:`load_checkpoint` restored besides the objects it loaded into."""

    step: int
    data_state: dict[str, Any]
    path: Path
    extra: dict[str, Any] = field(default_factory=dict)


def capture_rng() -> dict[str, Any]:
    """Python, numpy and torch (CPU, and CUDA when present) generator states."""
    np_state: Any = np.random.get_state()
    state: dict[str, Any] = {
        "python": _to_lists(random.getstate()),
        "numpy": {
            "kind": np_state[0],
            "key": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Set every generator back to ``state`` (from :func:`capture_rng`)."""
    random.setstate(_to_tuples(state["python"]))
    np_s = state["numpy"]
    key = np_s["key"].numpy().astype(np.uint32)
    np.random.set_state(
        (np_s["kind"], key, np_s["pos"], np_s["has_gauss"], np_s["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _to_lists(x: Any) -> Any:
    return [_to_lists(v) for v in x] if isinstance(x, tuple | list) else x


def _to_tuples(x: Any) -> Any:
    return tuple(_to_tuples(v) for v in x) if isinstance(x, list) else x


def step_dir(root: str | Path, step: int) -> Path:
    """Directory of the checkpoint of ``step`` under ``root``."""
    return Path(root) / f"{_PREFIX}{step:08d}"


def save_checkpoint(
    root: str | Path,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data_state: dict[str, Any],
    extra: dict[str, Any] | None = None,
    keep_last: int | None = None,
    scheduler: Any = None,
) -> Path:
    """Write the checkpoint of ``step`` atomically; return its directory.

    ``data_state`` (JSON-able) is whatever the data loader needs to continue where it was
    (epoch, position, ...). Call this after the optimizer step of ``step``; RNG states are
    captured now, so resuming continues the random streams from this point.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = step_dir(root, step)
    if final.exists():
        raise FileExistsError(f"checkpoint {final} already exists; refusing to overwrite it")
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
    try:
        _save_file(model.state_dict(), tmp / "model.pt")
        _save_file(optimizer.state_dict(), tmp / "optimizer.pt")
        _save_file(capture_rng(), tmp / "rng.pt")
        if scheduler is not None:
            _save_file(scheduler.state_dict(), tmp / "scheduler.pt")
        meta = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "data_state": data_state,
            "extra": extra or {},
        }
        _write_text(tmp / "meta.json", json.dumps(meta, indent=2, sort_keys=True))
        fsync_dir(tmp)
        os.rename(tmp, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if keep_last is not None:
        for old in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _save_file(obj: Any, path: Path) -> None:
    with open(path, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())


def _write_text(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoint directories under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(_PREFIX)]
    return sorted(found, key=lambda p: int(p.name[len(_PREFIX) :]))


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    found = list_checkpoints(root)
    return found[-1] if found else None


def load_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    restore_random: bool = True,
    scheduler: Any = None,
) -> Resumed:
    """Load ``path`` (a ``step_*`` directory) into ``model``/``optimizer``/``scheduler``, RNGs.

    A checkpoint without ``scheduler.pt`` (saved before the run had a schedule) leaves the
    scheduler at its start, with a warning.
    """
    path = Path(path)
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable checkpoint ({exc})") from exc
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: checkpoint format {meta.get('format_version')} != {FORMAT_VERSION}"
        )
    model.load_state_dict(torch.load(path / "model.pt", weights_only=True))
    if optimizer is not None:
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    if scheduler is not None:
        if (path / "scheduler.pt").is_file():
            scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
        else:
            log.warning("%s has no scheduler.pt; the learning-rate schedule restarts", path)
    if restore_random:
        restore_rng(torch.load(path / "rng.pt", weights_only=True))
    return Resumed(int(meta["step"]), dict(meta["data_state"]), path, dict(meta["extra"]))
