"""An index of file names over a fetched release's tree, so media are found wherever the
release's archives put them.

A release fetched from the Hub (``evalkit.hub``) extracts each archive into a folder of
its own and may nest its videos a folder deeper than the spec's layout says (a zip of
``data/x.mp4`` lands in ``media/videos_chunked_01.zip/data/x.mp4``). The loader looks a
media path up here when it is not where the layout says: by file name, preferring the
entry that shares the most trailing folders with the path asked for, so two files of the
same name in different folders (MVBench's ``star/`` and ``clevrer/``) stay apart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

INDEX_FILE = ".evalkit/media-index.json"
"""Where a fetched release keeps its index, under its folder."""


@dataclass
class MediaIndex:
    """File name -> the paths (relative to the release folder, ``/``-separated) that end in it."""

    names: dict[str, list[str]] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    """Indexed paths of archives still being fetched while a run goes (their listing is
    known; the files land there as each archive is extracted)."""

    @classmethod
    def of(cls, paths: Iterable[str], pending: Iterable[str] = ()) -> MediaIndex:
        """The index of ``paths`` and of the ``pending`` ones (relative, ``/``-separated)."""
        out = cls(pending=set(pending))
        for p in sorted({*paths, *out.pending}):
            out.names.setdefault(PurePosixPath(p).name, []).append(p)
        return out

    @classmethod
    def scan(cls, root: Path, skip: str = ".") -> MediaIndex:
        """The index of every file under ``root``, leaving out folders whose name starts
        with ``skip`` (evalkit's own state, temporary extractions)."""
        found = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(skip)]
            rel = PurePosixPath(Path(folder).relative_to(root).as_posix())
            found += [str(rel / f) if str(rel) != "." else f for f in files]
        return cls.of(found)

    def all(self) -> list[str]:
        """Every indexed path."""
        return [p for paths in self.names.values() for p in paths]

    def find(self, wanted: Iterable[str]) -> str | None:
        """The indexed path for the first of ``wanted`` (relative paths, in order of
        preference) whose file name is indexed: of its entries, the one sharing the most
        trailing path parts with it (ties: the shortest path). None if no name is."""
        for want in wanted:
            parts = PurePosixPath(want).parts
            entries = self.names.get(parts[-1]) if parts else None
            if not entries:
                continue
            return max(entries, key=lambda e: (shared_tail(want, e), -len(e), e))
        return None

    def write(self, root: Path) -> None:
        """Save the index under ``root`` (atomically)."""
        from evalkit.atomic import write_text_atomic

        path = root / INDEX_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"names": self.names, "pending": sorted(self.pending)}
        write_text_atomic(path, json.dumps(doc, sort_keys=True))

    @classmethod
    def load(cls, root: Path) -> MediaIndex | None:
        """The index saved under ``root``; None when there is none (a folder laid out by
        hand: its paths are as the layout says)."""
        path = root / INDEX_FILE
        try:
            stat = path.stat()
        except OSError:
            return None
        return _load(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int, size: int) -> MediaIndex:
    # keyed by the file's identity: a rewritten index is read again
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return MediaIndex(doc.get("names", {}), set(doc.get("pending", [])))


def shared_tail(path: str, entry: str) -> int:
    """How many trailing parts (file name, its folder, ...) two relative paths share."""
    parts, theirs = PurePosixPath(path).parts, PurePosixPath(entry).parts
    n = 0
    while n < min(len(parts), len(theirs)) and parts[-1 - n] == theirs[-1 - n]:
        n += 1
    return n
