"""Safetensors files written atomically and read back zero-copy through ``mmap``.

The layout is plain safetensors (8-byte little-endian header length, a JSON header padded
with spaces to 8 bytes, then the data section), so ``safetensors.safe_open`` reads our
files and we read its files. We write and parse it ourselves for two reasons, both
measured: ``safe_open(framework="numpy").get_tensor`` copies the tensor (hundreds of ms
for 200 MB), while a numpy view on an ``mmap`` costs well under a millisecond; and our
writer streams from the array into a temporary file we fsync before renaming it.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import stat
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
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# What a name in the cache can be besides a regular file or a link (said in errors).
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}

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

    Raises FileNotFoundError when there is no file at all. A symbolic link, or anything
    but a regular file, is DamagedFile and never opened (see :func:`open_plain`).
    """
    fd = open_plain(path, os.O_RDONLY)
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
        # The length is not said: it is the file's first 8 bytes, whatever the file is.
        raise DamagedFile(f"header length (its first 8 bytes) does not fit a {size}-byte file")
    try:
        header = json.loads(buf[8 : 8 + n])
    except UnicodeDecodeError as exc:
        raise DamagedFile(f"header is not UTF-8 (at byte {8 + exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DamagedFile(f"header is not JSON ({exc.msg} at byte {8 + exc.pos})") from None
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
    except (KeyError, TypeError, ValueError, AttributeError):
        raise DamagedFile(
            f"tensor {name!r}: header entry lacks a known dtype, a shape or data_offsets"
        ) from None
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


def not_plain(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor absent (a symbolic link, a
    FIFO, ...), said for people; None otherwise. Looks at the name only, follows nothing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            return "a symbolic link"
        if path.parent / target == path:
            return "a symbolic link to itself (a loop)"
        return f"a symbolic link to {target}"
    if stat.S_ISREG(st.st_mode):
        return None
    return _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")


def open_plain(path: Path, flags: int) -> int:
    """``os.open`` for a cache file that follows no symbolic link: neither ``path`` nor its
    folder may be one (a link or a loop is DamagedFile, naming it, never opened), and what
    it opens must be a regular file (a FIFO would block a reader, a device is not ours).

    Raises FileNotFoundError when there is no file.
    """
    # The check before opening names what is there; O_NOFOLLOW closes the race after it.
    why = not_plain(path)
    if why is None and path.parent.is_symlink():
        why = f"in {path.parent.name}/, a symbolic link"
    if why is not None:
        raise DamagedFile(f"{why}: not opened")
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # made a link since the check above
            raise DamagedFile(f"in {path.parent.name}/, a symbolic link: not opened") from None
        raise
    try:
        fd = os.open(path.name, flags | _NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DamagedFile("a symbolic link: not opened") from None
        raise
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DamagedFile("not a regular file: not opened")
    return fd
