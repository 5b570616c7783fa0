"""Which of a benchmark's samples name media that are not on disk: counted one sample
at a time (a run's preflight, ``bench validate`` streaming rows), each file looked at once,
and said in one line (the count, the first paths, the folder searched)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.sample import Sample

SHOWN = 3
"""Missing paths named in the one-line error (all are counted)."""


@dataclass
class MissingMedia:
    """The samples of one benchmark whose video or image is not on disk."""

    benchmark: str
    searched: str
    """The folder the media paths were resolved under (as the user can check it)."""
    total: int = 0
    """Samples of the benchmark (with or without media)."""
    samples: list[Sample] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    """The missing files, in sample order, each once."""
    keep: int | None = None
    """``samples`` and ``paths`` hold the first ``keep`` only (None: all, as a run needs)."""
    missing: int = 0
    """Samples with missing media, kept or not."""
    files: int = 0
    """Missing files, kept or not."""
    known: dict[str, bool] = field(default_factory=dict, repr=False)
    """Path -> exists, so each file is looked at once."""
    coming: Callable[[str], bool] | None = field(default=None, repr=False)
    """Whether a file not there yet is on its way (an archive fetched while the run goes)."""

    def add(self, sample: Sample) -> None:
        """Check one more sample (``bench validate --data`` feeds them as rows are read)."""
        self.total += 1
        gone = False
        for path in media_paths(sample):
            if path not in self.known:
                there = Path(path).exists()
                self.known[path] = there or (self.coming is not None and self.coming(path))
                if not self.known[path]:
                    self.files += 1
                    if self.keep is None or len(self.paths) < self.keep:
                        self.paths.append(path)
            gone = gone or not self.known[path]
        if gone:
            self.missing += 1
            if self.keep is None or len(self.samples) < self.keep:
                self.samples.append(sample)

    def reason(self, sample: Sample) -> str:
        """The failure recorded for ``sample`` under ``--allow-missing``."""
        gone = [p for p in media_paths(sample) if not Path(p).exists()]
        return f"media not found: {', '.join(gone)} (searched {os.path.abspath(self.searched)})"


def missing_media(
    benchmark: str,
    samples: Iterable[Sample],
    searched: str,
    *,
    keep: int | None = None,
    coming: Callable[[str], bool] | None = None,
) -> MissingMedia:
    """Which of ``samples`` (read one at a time) name a video or image that does not exist
    (one stat per file); ``keep``: the missing samples and paths kept (all are counted);
    ``coming``: a file not there yet but on its way is not missing."""
    out = MissingMedia(benchmark, searched, keep=keep, coming=coming)
    for s in samples:
        out.add(s)
    return out


def media_paths(sample: Sample) -> list[str]:
    """Every file a sample needs: its videos and images, and a subtitle file where its
    benchmark has them (``subtitle_path``)."""
    paths = [m.path for m in sample.media]
    subtitles = sample.fields.get("subtitle_path")
    return [*paths, str(subtitles)] if subtitles else paths


def describe_missing(found: list[MissingMedia]) -> str:
    """``N of M samples ... missing: first paths ... (searched DIR)``, per benchmark."""
    parts = []
    for m in found:
        root = os.path.abspath(m.searched)
        shown = ", ".join(_relative(os.path.abspath(p), root) for p in m.paths[:SHOWN])
        more = f" and {m.files - SHOWN} more" if m.files > SHOWN else ""
        parts.append(
            f"{m.benchmark}: {m.missing} of {m.total} samples have missing media "
            f"({m.files} file(s): {shown}{more}; searched {root})"
        )
    return "; ".join(parts)


def _relative(path: str, root: str) -> str:
    try:
        return os.path.relpath(path, root) if Path(path).is_relative_to(root) else path
    except ValueError:
        return path
