"""One cache entry: frames + VideoMeta + how they were made, in one safetensors file.

Every field a reader relies on is checked before anything is served: the format version,
the key the file claims (it must be the one asked for), the codec, the tensor shape and
dtype against the metadata and the VideoMeta, and the file length against its header.
A crc32 per 1 MiB chunk of the data is stored too; a FrameCache checks it the first time
it serves an entry (see ``integrity.py`` for why that is not every load), and ``verify``
always reads it in full.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from evalkit.cache import codec as codecs
from evalkit.cache.fileformat import DamagedFile, MappedFile, open_mapped, write_atomic
from evalkit.cache.integrity import CHUNK, FirstTouch, chunk_sums
from evalkit.cache.key import FORMAT_VERSION, SourceIdentity, effective_spec
from evalkit.sample import VideoRef
from evalkit.video.types import Frames, FrameSpec, VideoMeta

SUFFIX = ".safetensors"
_P = "evalkit."  # prefix of our keys in the safetensors metadata
T = TypeVar("T")


@dataclass(frozen=True)
class EntryInfo:
    """What an entry's header says, without touching its frames."""

    path: Path
    key: str
    codec: str
    shape: tuple[int, int, int, int]
    spec: dict[str, Any]
    source: SourceIdentity
    meta: VideoMeta
    chunk_sums: dict[str, str]
    """crc32 per chunk of each tensor (8 hex digits each)."""
    chunk_bytes: int
    header_digest: str
    size: int


def write_entry(
    path: Path,
    *,
    key: str,
    frames: Frames,
    spec: FrameSpec,
    ref: VideoRef,
    source: SourceIdentity,
    codec: str,
    jpeg_quality: int,
) -> int:
    """Encode ``frames`` and write them atomically to ``path``; return the file size."""
    tensors = codecs.encode(frames.array, codec, jpeg_quality)
    metadata = {
        _P + "format": str(FORMAT_VERSION),
        _P + "key": key,
        _P + "codec": codec,
        _P + "jpeg_quality": str(jpeg_quality) if codec == "jpeg" else "",
        _P + "shape": json.dumps(list(frames.array.shape)),
        _P + "spec": json.dumps(effective_spec(ref, spec).model_dump(mode="json"), sort_keys=True),
        _P + "source": source.to_json(),
        _P + "meta": json.dumps(frames.meta.to_dict(), sort_keys=True),
        _P + "chunk_bytes": str(CHUNK),
        _P + "chunk_crc32": json.dumps(
            {name: chunk_sums(a.reshape(-1).data.cast("B")) for name, a in tensors}, sort_keys=True
        ),
    }
    described = {name: (a.dtype, a.shape) for name, a in tensors}
    metadata[_P + "header_digest"] = _header_digest(metadata, described)
    return write_atomic(path, tensors, metadata)


def _header_digest(
    metadata: dict[str, str], tensors: dict[str, tuple[np.dtype[Any], tuple[int, ...]]]
) -> str:
    """Checksum of everything in the header but itself: cheap enough to check on every load,
    so a flipped byte in the VideoMeta (say, one frame index) is never served."""
    doc = {
        "metadata": {k: v for k, v in metadata.items() if k != _P + "header_digest"},
        "tensors": {name: [dt.str, list(shape)] for name, (dt, shape) in tensors.items()},
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def read_info(mapped: MappedFile, expect_key: str | None = None) -> EntryInfo:
    """Parse and cross-check the header of a mapped entry; DamagedFile when it does not add up."""
    md = mapped.metadata
    version = _field(md, "format", int)
    if version != FORMAT_VERSION:
        raise DamagedFile(f"cache format {version}, this evalkit reads {FORMAT_VERSION}")
    described = {name: (t.dtype, t.shape) for name, t in mapped.tensors.items()}
    digest = _field(md, "header_digest", str)
    if digest != _header_digest(md, described):
        raise DamagedFile("header checksum mismatch (metadata changed on disk)")
    key = _field(md, "key", str)
    shape = _field(md, "shape", lambda v: tuple(int(x) for x in json.loads(v)))
    meta = _field(md, "meta", lambda v: VideoMeta.from_dict(json.loads(v)))
    info = EntryInfo(
        path=mapped.path,
        key=key,
        codec=_field(md, "codec", str),
        shape=shape,  # type: ignore[arg-type]  # checked to be 4 long below
        spec=_field(md, "spec", json.loads),
        source=_field(md, "source", SourceIdentity.from_json),
        meta=meta,
        chunk_sums=_field(md, "chunk_crc32", json.loads),
        chunk_bytes=_field(md, "chunk_bytes", int),
        header_digest=digest,
        size=len(mapped.buffer),
    )
    if expect_key is not None and key != expect_key:
        raise DamagedFile(f"file claims key {key[:12]}..., expected {expect_key[:12]}...")
    if expect_key is None and mapped.path.name != key + SUFFIX:
        raise DamagedFile(f"file claims key {key[:12]}... but is named {mapped.path.name}")
    sums = info.chunk_sums
    if (
        info.chunk_bytes <= 0
        or not isinstance(sums, dict)
        or not all(isinstance(v, str) for v in sums.values())
    ):
        raise DamagedFile("chunk checksums are malformed")
    if len(shape) != 4 or shape[3] != 3:
        raise DamagedFile(f"shape {list(shape)} is not T x H x W x 3")
    if (shape[0], shape[1], shape[2]) != (len(meta.indices), meta.height, meta.width):
        raise DamagedFile(
            f"shape {list(shape)} disagrees with VideoMeta "
            f"({len(meta.indices)} indices, {meta.height}x{meta.width})"
        )
    return info


def _field(md: dict[str, str], name: str, parse: Callable[[str], T]) -> T:
    """Metadata field ``name`` parsed; DamagedFile naming the field (never its value: the
    file's contents stay out of messages) when it is missing or does not parse."""
    try:
        return parse(md[_P + name])
    except (KeyError, ValueError, TypeError, AttributeError):
        raise DamagedFile(f"metadata field {name!r} is missing or malformed") from None


def read_entry(
    path: Path,
    expect_key: str | None = None,
    *,
    verifier: FirstTouch | None = None,
) -> tuple[Frames, EntryInfo]:
    """Load an entry (zero-copy for raw frames); DamagedFile if anything is off.

    ``verifier`` checks the data's chunk checksums (reading every byte) unless it has
    vouched for this file before; None skips them. Raises FileNotFoundError when there
    is no entry.
    """
    mapped = open_mapped(path)
    info = read_info(mapped, expect_key)
    if verifier is not None:
        verifier.check(mapped, info.chunk_sums, info.chunk_bytes, info.header_digest)
    array = codecs.decode(mapped, info.codec, info.shape)
    try:
        return Frames(array, info.meta), info
    except ValueError as exc:
        raise DamagedFile(str(exc)) from None
