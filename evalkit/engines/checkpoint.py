"""Checkpoints as users have them: weight names vLLM 0.32 loads, without touching the user's.

transformers 5 may save a family's weights under other names than vLLM 0.32 loads (a
LLaVA-OneVision saved by 5.19 names its SigLIP tower ``vision_tower.*``; vLLM looks for
``vision_tower.vision_model.*`` and stops with "There is no module or parameter named
'vision_tower.embeddings'"). A family lists such renames (``FamilySpec.weight_renames``);
evalkit reads only the safetensors headers to see whether a checkpoint needs them, and if
it does hands vLLM a view of it: a folder (under ``$XDG_CACHE_HOME/evalkit/checkpoints``)
with a link to every file of the checkpoint but its weights, which are written there once
with the names vLLM expects. A safetensors file is an 8-byte header length, a JSON header
(names, dtypes, offsets) and the tensor bytes: renaming rewrites the header and copies the
bytes as they are. A checkpoint that cannot be served so (weights not in safetensors, no
room for the copy) is refused in one line naming the mismatch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

from evalkit.engines.family import ModelFamily
from evalkit.errors import EvalkitError

INDEX = "model.safetensors.index.json"


def checkpoints_root() -> Path:
    """Where renamed views of checkpoints are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evalkit" / "checkpoints"


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """A safetensors file's JSON header and the offset where its tensor bytes start."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        try:
            header = json.loads(f.read(size))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EvalkitError(f"{path}: not a safetensors file ({exc})") from None
    return header, 8 + size


def renamed(name: str, renames: tuple[tuple[str, str], ...]) -> str:
    """``name`` as vLLM expects it (the first rename whose prefix matches and whose target
    it does not already carry)."""
    for old, new in renames:
        if name.startswith(old) and not name.startswith(new):
            return new + name[len(old) :]
    return name


def weight_files(folder: Path) -> list[Path]:
    """The checkpoint's safetensors files (sorted)."""
    return sorted(folder.glob("*.safetensors"))


def renames_needed(folder: Path, family: ModelFamily) -> dict[str, str]:
    """{name in the checkpoint: name vLLM loads} for every weight that needs renaming."""
    renames = family.family.weight_renames
    if not renames:
        return {}
    out: dict[str, str] = {}
    for path in weight_files(folder):
        header, _ = read_header(path)
        for name in header:
            if name != "__metadata__" and (new := renamed(name, renames)) != name:
                out[name] = new
    return out


def loadable(model: str, family: ModelFamily | None) -> str:
    """The folder vLLM should load for ``model``: itself, or a view with renamed weights."""
    folder = Path(model)
    if family is None or not folder.is_dir():
        return model
    if not weight_files(folder) and family.family.weight_renames:
        if any(folder.glob("*.bin")) or any(folder.glob("*.pt")):
            raise EvalkitError(
                f"{folder}: {family.family.title} weights saved as .bin may be named otherwise "
                "than vLLM loads them and evalkit renames only safetensors; save the "
                "checkpoint with safe_serialization=True"
            )
        return model
    needed = renames_needed(folder, family)
    if not needed:
        return model
    return str(_view(folder, family))


def _view(folder: Path, family: ModelFamily) -> Path:
    files = weight_files(folder)
    key = hashlib.sha256()
    for path in files:
        st = path.stat()
        key.update(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    key.update(repr(family.family.weight_renames).encode())
    root = checkpoints_root()
    view = root / f"{folder.name}-{key.hexdigest()[:16]}"
    if (view / ".complete").is_file():
        return view
    need = sum(p.stat().st_size for p in files)
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if free < need * 1.05:
        example = next(iter(renames_needed(folder, family).items()))
        raise EvalkitError(
            f"{folder}: its weights are named as transformers 5 saves them ({example[0]!r}) "
            f"but vLLM 0.32 loads {example[1]!r}; a renamed copy needs {need / 2**30:.1f} GiB "
            f"and {root} has {free / 2**30:.1f} GiB free (set XDG_CACHE_HOME elsewhere)"
        )
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    try:
        _write_view(folder, tmp, family)
        tmp.rename(view)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (view / ".complete").is_file():  # another process made it first: use it
            raise
    return view


def _write_view(folder: Path, out: Path, family: ModelFamily) -> None:
    renames = family.family.weight_renames
    for item in folder.iterdir():
        if item.suffix == ".safetensors" or item.name == INDEX:
            continue
        (out / item.name).symlink_to(item.resolve())
    for path in weight_files(folder):
        header, start = read_header(path)
        header = {renamed(k, renames): v for k, v in header.items()}
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)  # keep the tensor bytes 8-aligned, as writers do
        with open(path, "rb") as src, open(out / path.name, "wb") as dst:
            dst.write(struct.pack("<Q", len(blob)) + blob)
            src.seek(start)
            shutil.copyfileobj(src, dst, 16 * 2**20)
            dst.flush()
            os.fsync(dst.fileno())
    if (folder / INDEX).is_file():
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
        index["weight_map"] = {renamed(k, renames): v for k, v in index["weight_map"].items()}
        (out / INDEX).write_text(json.dumps(index, indent=2), encoding="utf-8")
    (out / ".complete").write_text("", encoding="utf-8")
