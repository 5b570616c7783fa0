"""Durable, all-or-nothing file writes: the one helper every writer of a whole file uses.

A file is written under a unique temporary name beside its destination, fsync'd, renamed
over the destination, and the directory fsync'd (so the rename survives a power cut too).
A reader sees the old file or the whole new one, never half of it; concurrent writers of
the same path (two processes filling one judge cache) never share a temporary file.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TEMP_MARK = ".tmp-"
"""Marks a temporary name (``<name>.tmp-<pid>-<random>``); readers never open such files."""


def temp_path(path: Path) -> Path:
    """A fresh temporary name beside ``path`` (same folder: the rename stays atomic)."""
    return path.with_name(f"{path.name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def fsync_dir(directory: Path) -> None:
    """Make a rename (or create) in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp: Path, path: Path) -> None:
    """Move a finished temporary file over ``path`` durably (fsync it, rename, fsync dir)."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once or not at all (see the module docstring)."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` all at once or not at all."""
    write_bytes_atomic(path, text.encode("utf-8"))


__all__ = [
    "TEMP_MARK",
    "commit",
    "fsync_dir",
    "temp_path",
    "write_bytes_atomic",
    "write_text_atomic",
]
