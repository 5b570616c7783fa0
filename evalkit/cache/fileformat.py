"""Safetensors files written atomically and read back zero-copy through ``mmap``.

The layout is plain safetensors (8-byte little-endian header length, a JSON header padded
with spaces to 8 bytes, then the data section), so ``safetensors.safe_open`` reads our
files and we read its files. We write and parse it ourselves for two reasons, both
measured: ``safe_open(framework="numpy").get_tensor`` copies the tensor (hundreds of ms
for 200 MB), while a numpy view on an ``mmap`` costs well under a millisecond; and our
writer streams from the array into a temporary file we fsync before renaming it.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.atomic import TEMP_MARK as ATOMIC_TEMP_MARK
from evalkit.atomic import fsync_dir, temp_path

# safetensors dtype names <-> numpy dtypes (only the ones we store).
_DTYPES: dict[str, np.dtype[Any]] = {
    "U8": np.dtype(np.uint8),
    "I64": np.dtype("<i8"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own bound on the header size
_CHUNK = 16 * 1024 * 1024
TEMP_MARK = ATOMIC_TEMP_MARK

# Called after each chunk of data is written (bytes so far); tests use it to kill a
# writer half-way. None in normal use.
_after_chunk: Callable[[int], None] | None = None


class DamagedFile(Exception):
    """A file that is not a complete, well-formed safetensors file (the reason says why)."""


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lies in the data section."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass
class MappedFile:
    """A parsed header plus the read-only memory map of the whole file."""

    path: Path
    metadata: dict[str, str]
    tensors: dict[str, TensorInfo]
    data_start: int
    buffer: mmap.mmap
    stat: os.stat_result
    """The file's status when it was mapped (integrity stamps compare it)."""

    def array(self, name: str) -> np.ndarray:
        """A read-only numpy view of tensor ``name`` on the mapped file (no copy)."""
        t = self.tensors[name]
        count = (t.end - t.begin) // t.dtype.itemsize
        flat = np.frombuffer(
            self.buffer, dtype=t.dtype, count=count, offset=self.data_start + t.begin
        )
        return flat.reshape(t.shape)


def _header_bytes(tensors: Sequence[tuple[str, np.ndarray]], metadata: dict[str, str]) -> bytes:
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, a in tensors:
        n = a.nbytes
        header[name] = {
            "dtype": _NAMES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + n],
        }
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    return raw + b" " * (-len(raw) % 8)  # keep the data section 8-byte aligned


def write_atomic(
    path: Path, tensors: Sequence[tuple[str, np.ndarray]], metadata: dict[str, str]
) -> int:
    """Write a safetensors file to ``path`` via an fsync'd temp file + rename; return its size.

    Tensors are laid out in the given order (put 8-byte dtypes first to keep them aligned).
    A crash at any point leaves either the old state or the complete new file at ``path``;
    at worst a ``<name>.tmp-*`` file remains, which readers never open.
    """
    arrays = [(name, np.ascontiguousarray(a)) for name, a in tensors]
    header = _header_bytes(arrays, metadata)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(header)))
            f.write(header)
            written = 0
            for _, a in arrays:
                view = a.reshape(-1).data.cast("B")
                for i in range(0, len(view), _CHUNK):
                    f.write(view[i : i + _CHUNK])
                    written += len(view[i : i + _CHUNK])
                    if _after_chunk is not None:
                        f.flush()
                        _after_chunk(written)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)  # the rename itself: without it a power cut can forget the name
    return size


def open_mapped(path: Path) -> MappedFile:
    """Map ``path`` and check its header against its length; raise DamagedFile if anything is off.

    Raises FileNotFoundError when there is no file at all.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        size = st.st_size
        if size < 8:
            raise DamagedFile(f"{size} bytes, too short for a safetensors header")
        buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)  # the mapping keeps the file alive on its own
    (n,) = struct.unpack("<Q", buf[:8])
    if n > _MAX_HEADER or 8 + n > size:
        raise DamagedFile(f"header length {n} does not fit in a {size}-byte file")
    try:
        header = json.loads(buf[8 : 8 + n])
    except (UnicodeDecodeError, ValueError) as exc:
        raise DamagedFile(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise DamagedFile("header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise DamagedFile("header metadata is not a string-to-string map")
    tensors = {name: _tensor_info(name, spec) for name, spec in header.items()}
    data_len = _check_layout(tensors)
    if 8 + n + data_len != size:
        raise DamagedFile(
            f"file is {size} bytes but its header describes {8 + n + data_len} (truncated?)"
        )
    return MappedFile(path, metadata, tensors, 8 + n, buf, st)


def _tensor_info(name: str, spec: dict[str, Any]) -> TensorInfo:
    try:
        dtype = _DTYPES[spec["dtype"]]
        shape = tuple(int(x) for x in spec["shape"])
        begin, end = (int(x) for x in spec["data_offsets"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DamagedFile(f"tensor {name!r}: malformed header entry ({exc!r})") from None
    if any(d < 0 for d in shape) or not 0 <= begin <= end:
        raise DamagedFile(f"tensor {name!r}: negative shape or offsets")
    if end - begin != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise DamagedFile(f"tensor {name!r}: shape {list(shape)} does not match its byte range")
    return TensorInfo(dtype, shape, begin, end)


def _check_layout(tensors: dict[str, TensorInfo]) -> int:
    """The data section must be covered by the tensors exactly, without holes or overlaps."""
    pos = 0
    for t in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if t.begin != pos:
            raise DamagedFile("tensor byte ranges leave a hole or overlap")
        pos = t.end
    return pos
