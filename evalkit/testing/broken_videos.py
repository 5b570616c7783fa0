"""Broken video files for tests: what a cut-off download or a mislabelled page looks like.

The readers must name such a file and carry on (``evalkit.video``, the frame cache); these
writers make one of each kind in a test's temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_truncated(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], keep: float = 0.5
) -> Path:
    """Copy the first ``keep`` fraction of ``src``'s bytes to ``dst`` (a cut-off download)."""
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[: int(len(data) * keep)])
    return Path(dst)


def write_zero_bytes(path: str | os.PathLike[str]) -> Path:
    """An empty file (a failed copy)."""
    Path(path).write_bytes(b"")
    return Path(path)


def write_text_file(path: str | os.PathLike[str], text: str = "this is not a video\n") -> Path:
    """A text file, whatever its suffix says (e.g. an HTML error page saved as .mp4)."""
    Path(path).write_text(text * 20)
    return Path(path)
