"""Cache keys: what identifies a source file, and the hash over everything that shapes frames.

Bump FORMAT_VERSION whenever the file layout, the metadata or the decoding semantics
change: every older entry then simply stops being looked up (``prune`` clears them).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from evalkit.errors import CacheError, VideoError
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec

# 2: crc32 per 1 MiB chunk of each tensor replaces the whole-data digest.
FORMAT_VERSION = 2
Identity = Literal["stat", "content"]
Codec = Literal["raw", "jpeg"]

# (path, inode, size, mtime_ns, ctime_ns) -> sha256 of the content, so content keys cost
# one read of the file per process, not one per lookup. The ctime is there because any
# write moves it, even one that puts the mtime back (which is what content identity is for).
_CONTENT_HASHES: dict[tuple[str, int, int, int, int], str] = {}


@dataclass(frozen=True)
class SourceIdentity:
    """The source file as seen when the key was made."""

    path: str
    size: int
    mtime_ns: int
    sha256: str | None = None

    def to_json(self) -> str:
        """Compact JSON (stored in each cache file, read back by ``prune``)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SourceIdentity:
        """Inverse of :meth:`to_json`."""
        return cls(**json.loads(text))


def as_ref(ref: VideoRef | str | os.PathLike[str]) -> VideoRef:
    """Accept a VideoRef or a plain path."""
    return ref if isinstance(ref, VideoRef) else VideoRef(path=os.fspath(ref))


def source_identity(path: str, identity: Identity = "stat") -> SourceIdentity:
    """Stat (and with ``identity="content"`` hash) the source file; VideoError if it is missing."""
    resolved = Path(path).expanduser().resolve()
    try:
        st = resolved.stat()
    except FileNotFoundError:
        raise VideoError(path, "no such file") from None
    except OSError as exc:
        raise VideoError(path, f"cannot stat: {exc.strerror}") from None
    if not resolved.is_file():
        raise VideoError(path, "not a regular file")
    sha = None
    if identity == "content":
        memo = (str(resolved), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        sha = _CONTENT_HASHES.get(memo)
        if sha is None:
            sha = _CONTENT_HASHES[memo] = _sha256_file(resolved)
    elif identity != "stat":
        raise CacheError(f"unknown cache identity {identity!r}; use 'stat' or 'content'")
    return SourceIdentity(str(resolved), st.st_size, st.st_mtime_ns, sha)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * 1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def effective_spec(ref: VideoRef, spec: FrameSpec) -> FrameSpec:
    """The spec the decoder applies: a window on the ref replaces the spec's window.

    Keys are made from it, so ``(ref with window, spec)`` and ``(plain ref,
    spec.window(...))`` name one entry, as they decode to the same frames.
    """
    if ref.start is None and ref.end is None:
        return spec
    return spec.window(ref.start, ref.end)


def cache_key(
    source: SourceIdentity,
    ref: VideoRef,
    spec: FrameSpec,
    codec: Codec = "raw",
    jpeg_quality: int | None = None,
) -> str:
    """sha256 over the source identity, every field of the effective FrameSpec (the ref's
    window folded in) and the format.

    With a content hash the path is left out, so copies of one file share an entry.
    """
    who: dict[str, Any] = (
        {"sha256": source.sha256}
        if source.sha256 is not None
        else {"path": source.path, "size": source.size, "mtime_ns": source.mtime_ns}
    )
    doc = {
        "format": FORMAT_VERSION,
        "source": who,
        "spec": effective_spec(ref, spec).model_dump(mode="json"),
        "codec": codec,
        "jpeg_quality": jpeg_quality if codec == "jpeg" else None,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def fingerprint_settings(identity: Identity, codec: Codec, jpeg_quality: int) -> dict[str, Any]:
    """A run's cache settings for its fingerprint, named only when not the defaults, so
    that runs made before they existed keep theirs (jpeg frames are lossy: results move)."""
    if (identity, codec) == ("stat", "raw"):
        return {}
    quality = jpeg_quality if codec == "jpeg" else None
    return {"frame_cache": {"identity": identity, "codec": codec, "jpeg_quality": quality}}
