"""How frames are laid out in a cache file: raw uint8 (default) or one JPEG per frame.

Raw frames load zero-copy; JPEG trades a decode on every load (and lossy pixels) for
files several times smaller, for users short of disk. ``perf/cache.py`` measures both.
"""

from __future__ import annotations

import io

import numpy as np

from evalkit.cache.fileformat import DamagedFile, MappedFile

CODECS = ("raw", "jpeg")


def encode(frames: np.ndarray, codec: str, quality: int) -> list[tuple[str, np.ndarray]]:
    """The tensors to store for ``frames`` (T x H x W x 3 uint8) under ``codec``."""
    if codec == "raw":
        return [("frames", frames)]
    if codec == "jpeg":
        from PIL import Image  # only users of the jpeg codec pay for importing PIL

        blobs = []
        for frame in frames:
            buf = io.BytesIO()
            Image.fromarray(np.ascontiguousarray(frame), "RGB").save(
                buf, format="JPEG", quality=quality
            )
            blobs.append(buf.getvalue())
        offsets = np.zeros(len(blobs) + 1, dtype="<i8")
        offsets[1:] = np.cumsum([len(b) for b in blobs])
        data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        return [("jpeg_offsets", offsets), ("jpeg", data)]  # int64 first: stays 8-byte aligned
    raise ValueError(f"unknown cache codec {codec!r}; use one of {CODECS}")


def decode(mapped: MappedFile, codec: str, shape: tuple[int, int, int, int]) -> np.ndarray:
    """The frames stored in ``mapped``: a zero-copy view (raw) or freshly decoded (jpeg)."""
    if codec == "raw":
        if "frames" not in mapped.tensors or mapped.tensors["frames"].dtype != np.uint8:
            raise DamagedFile("no uint8 'frames' tensor")
        frames = mapped.array("frames")
        if frames.shape != shape:
            raise DamagedFile(f"frames tensor is {list(frames.shape)}, metadata says {list(shape)}")
        return frames
    if codec == "jpeg":
        return _decode_jpeg(mapped, shape)
    raise DamagedFile(f"unknown codec {codec!r}")


def _decode_jpeg(mapped: MappedFile, shape: tuple[int, int, int, int]) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    if "jpeg" not in mapped.tensors or "jpeg_offsets" not in mapped.tensors:
        raise DamagedFile("no 'jpeg' / 'jpeg_offsets' tensors")
    offsets = mapped.array("jpeg_offsets")
    data = mapped.array("jpeg")
    if (
        offsets.shape != (shape[0] + 1,)
        or offsets[0] != 0
        or offsets[-1] != data.size
        or np.any(np.diff(offsets) <= 0)
    ):
        raise DamagedFile("jpeg offsets do not match the frame count or the data")
    out = np.empty(shape, dtype=np.uint8)
    for i in range(shape[0]):
        blob = data[offsets[i] : offsets[i + 1]].tobytes()
        try:
            with Image.open(io.BytesIO(blob)) as img:
                pixels = np.asarray(img.convert("RGB"))
        except (OSError, UnidentifiedImageError) as exc:
            raise DamagedFile(f"frame {i}: JPEG does not decode ({exc})") from None
        if pixels.shape != shape[1:]:
            raise DamagedFile(
                f"frame {i}: JPEG is {list(pixels.shape)}, expected {list(shape[1:])}"
            )
        out[i] = pixels
    out.flags.writeable = False  # same contract as the raw codec's read-only view
    return out
