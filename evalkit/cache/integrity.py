"""Per-chunk checksums of an entry's data, checked before an entry is first served.

Each tensor's bytes are cut into CHUNK-sized pieces and a crc32 of each is stored in the
header (which its own header checksum covers). zlib's crc32 is in the standard library
and finds every burst error shorter than 32 bits; xxh3 would hash about 4x faster but
means a new dependency, and the full pass below runs once per entry per change, not once
per load (see ``perf/cache.py``: ``verify_full_check_ms``).

Reading every byte costs far more than a warm mmap'd load (which touches one byte per
page), so a full check on every load is out. :class:`FirstTouch` checks an entry the
first time a process serves it, and then leaves a *stamp* beside it: the file's identity
(device, inode, size, mtime, ctime) and header checksum at the time its bytes checked
out. A later process that finds a matching stamp skips the pass. Any write to the file
(even one that restores its mtime) moves its ctime, and a replaced file has another
inode, so the stamp stops matching and the bytes are checked again. What a stamp cannot
see is damage below the file system (media errors); ``evalkit cache verify`` reads
everything, stamps or not.
"""

from __future__ import annotations

import json
import logging
import os
import time
import zlib
from pathlib import Path
from typing import Any

from evalkit.cache.fileformat import DamagedFile, MappedFile, open_plain

log = logging.getLogger(__name__)

CHUNK = 1 << 20  # 1 MiB: ~1.3 frames at 512x512, small enough to name the damaged frames
STAMP_SUFFIX = ".verified"
# A stamp is only written for a file unchanged for this long: a file system with coarse
# timestamps could give a write made during our pass the same ctime as the one before it.
_SETTLED_NS = 2 * 10**9
_STAMP_MAX = 512  # a stamp is ~120 bytes; more is not one of ours

Identity = tuple[int, int, int, int, int, str]


def chunk_sums(data: memoryview, chunk: int = CHUNK) -> str:
    """crc32 of each ``chunk``-byte piece of ``data``, as 8 hex digits each."""
    return "".join(f"{zlib.crc32(data[i : i + chunk]):08x}" for i in range(0, len(data), chunk))


def find_damage(mapped: MappedFile, sums: dict[str, str], chunk: int) -> str | None:
    """Read every byte of ``mapped``'s tensors; say where they differ from ``sums``, or None."""
    if set(sums) != set(mapped.tensors):
        return f"checksums cover tensors {sorted(sums)}, the file has {sorted(mapped.tensors)}"
    view = memoryview(mapped.buffer)
    for name, t in mapped.tensors.items():
        begin = mapped.data_start + t.begin
        actual = chunk_sums(view[begin : mapped.data_start + t.end], chunk)
        if actual == sums[name]:
            continue
        if len(actual) != len(sums[name]):
            return (
                f"tensor {name!r}: {len(sums[name]) // 8} checksums for {len(actual) // 8} chunks"
            )
        bad = next(
            i for i in range(0, len(actual), 8) if actual[i : i + 8] != sums[name][i : i + 8]
        )
        lo = (bad // 8) * chunk
        hi = min(lo + chunk, t.end - t.begin)
        return (
            f"data checksum mismatch in tensor {name!r} bytes {lo}..{hi}{_frames(t.shape, lo, hi)}"
        )
    return None


def _frames(shape: tuple[int, ...], lo: int, hi: int) -> str:
    """Which frames a byte range of a T x H x W x 3 uint8 tensor holds (people ask that)."""
    if len(shape) != 4:
        return ""
    per = shape[1] * shape[2] * shape[3]
    first, last = lo // per, (hi - 1) // per
    return f" (frame {first})" if first == last else f" (frames {first}-{last})"


class FirstTouch:
    """Checks an entry's data the first time this process serves it (see module docstring).

    ``stamps=False`` keeps the per-process memory but neither reads nor writes stamps;
    ``force=True`` checks every file in full whatever it remembers (``cache verify``) and
    stamps those that pass.
    """

    def __init__(self, *, stamps: bool = True, force: bool = False) -> None:
        self.stamps = stamps
        self.force = force
        self._seen: set[Identity] = set()
        self.full_checks = 0  # how many full passes this verifier made (tests, perf)

    def check(self, mapped: MappedFile, sums: dict[str, str], chunk: int, header: str) -> None:
        """Raise DamagedFile unless ``mapped``'s data matches ``sums`` (or was seen to)."""
        ident = identity(mapped.stat, header)
        stamp = stamp_path(mapped.path)
        if not self.force:
            if ident in self._seen:
                return
            if self.stamps and _read_stamp(stamp) == ident:
                self._seen.add(ident)
                return
        self.full_checks += 1
        damage = find_damage(mapped, sums, chunk)
        if damage is not None:
            raise DamagedFile(damage)
        self._seen.add(ident)
        if self.stamps:
            _write_stamp(mapped.path, stamp, ident)


def identity(st: os.stat_result, header: str) -> Identity:
    """What must stay the same for a stamp to vouch for the file's bytes."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, header)


def stamp_path(entry: Path) -> Path:
    """The stamp file beside an entry."""
    return entry.with_name(entry.name.rsplit(".", 1)[0] + STAMP_SUFFIX)


def _read_stamp(stamp: Path) -> Identity | None:
    try:
        fd = open_plain(stamp, os.O_RDONLY)  # a link or a FIFO in its place is no stamp
    except (OSError, DamagedFile):
        return None
    try:
        doc: Any = json.loads(os.read(fd, _STAMP_MAX))
    except (OSError, ValueError):
        return None  # unreadable or torn: check the bytes instead
    finally:
        os.close(fd)
    return tuple(doc) if isinstance(doc, list) and len(doc) == 6 else None


def _write_stamp(entry: Path, stamp: Path, ident: Identity) -> None:
    try:
        now = os.stat(entry)
    except OSError:
        return
    # Stamp only what we checked: the same file, unchanged during the pass, and settled.
    if identity(now, ident[5]) != ident or time.time_ns() - now.st_ctime_ns < _SETTLED_NS:
        return
    try:
        # A new file each time: whatever lies at the name (a link to another file, a second
        # name of one) is replaced, never written through. A torn write leaves invalid JSON,
        # which reads as "no stamp": no temp file needed.
        stamp.unlink(missing_ok=True)
        fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            os.write(fd, json.dumps(list(ident)).encode())
        finally:
            os.close(fd)
    except OSError as exc:  # a read-only cache: every process checks once instead
        log.debug("frame cache: cannot write %s: %s", stamp, exc)
