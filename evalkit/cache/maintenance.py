"""Looking after a cache directory: verify every entry, list them, prune what is dead."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import Timeout

from evalkit.cache.entry import SUFFIX, EntryInfo, read_entry, read_info
from evalkit.cache.fileformat import TEMP_MARK, DamagedFile, not_plain, open_mapped
from evalkit.cache.frame_cache import FrameCache, key_lock, shards
from evalkit.cache.integrity import STAMP_SUFFIX, FirstTouch, stamp_path
from evalkit.cache.key import source_identity
from evalkit.errors import CacheError, VideoError


@contextmanager
def _unless_busy(entry: Path) -> Iterator[bool]:
    """Hold the key's lock if nobody else does; yields False when a writer is active."""
    lock = key_lock(entry)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def linked_folders(root: Path) -> dict[Path, str]:
    """Two-letter names under ``root`` that are symbolic links where the cache keeps its
    folders: never followed, and said as such (-> why)."""
    if not root.is_dir():
        return {}
    return {
        d: f"{not_plain(d)} in place of a folder of the cache: never followed"
        for d in sorted(root.iterdir())
        if len(d.name) == 2 and d.is_symlink()
    }


@dataclass
class VerifyReport:
    """Entries that read back intact, the damaged ones with their reason, and unfinished
    writes (temporary files) with their size and whether a writer still holds their key."""

    good: int = 0
    damaged: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    bytes: int = 0
    unfinished: dict[str, str] = field(default_factory=dict)


def _temp_entry(tmp: Path) -> Path:
    """The entry a temporary file was going to become."""
    return tmp.with_name(tmp.name.split(TEMP_MARK)[0])


def unfinished_writes(cache: FrameCache) -> dict[str, str]:
    """Temporary files under the root: path -> size and whether its writer is still at it."""
    found: dict[str, str] = {}
    for d in shards(cache.root):
        for tmp in sorted(d.glob(f"*{TEMP_MARK}*")):
            try:
                size = tmp.lstat().st_size
            except FileNotFoundError:
                continue  # renamed into place while we looked
            with _unless_busy(_temp_entry(tmp)) as free:
                state = "abandoned (`evalkit cache prune` removes it)" if free else "in progress"
            found[str(tmp)] = f"{size / 1e6:.1f} MB, {state}"
    return found


def verify(cache: FrameCache, *, remove: bool = False) -> VerifyReport:
    """Read every entry in full (checksums included; the good ones get an integrity stamp),
    optionally remove the damaged ones; list unfinished writes."""
    report = VerifyReport()
    checker = FirstTouch(force=True)
    for path in cache.entries():
        try:
            _, info = read_entry(path, verifier=checker)
        except FileNotFoundError:
            continue  # pruned or replaced while we walked
        except DamagedFile as exc:
            report.damaged[str(path)] = str(exc)
            if remove and _remove_damaged(cache, path):
                report.removed.append(str(path))
            continue
        report.good += 1
        report.bytes += info.size
    for folder, why in linked_folders(cache.root).items():
        report.damaged[str(folder)] = why
        if remove and _remove_damaged(cache, folder, link=True):
            report.removed.append(str(folder))
    report.unfinished = unfinished_writes(cache)
    return report


def _remove_damaged(cache: FrameCache, path: Path, *, link: bool = False) -> bool:
    """Remove a damaged entry unless a reader holds it (or a ``link`` in place of a folder);
    CacheError when the cache cannot be written (read-only), in one line, not an OSError."""
    try:
        if link:
            path.unlink(missing_ok=True)
            return True
        with _unless_busy(path) as free:
            if free:
                path.unlink(missing_ok=True)
                stamp_path(path).unlink(missing_ok=True)
            return bool(free)
    except OSError as exc:
        raise CacheError(
            f"{path} is damaged but cannot be removed ({exc.strerror or exc}): the cache "
            f"{cache.root} is not writable here; make it writable, or verify without --remove"
        ) from None


def _infos(cache: FrameCache) -> Iterator[tuple[Path, EntryInfo | str]]:
    for path in cache.entries():
        try:
            yield path, read_info(open_mapped(path))
        except FileNotFoundError:
            continue
        except DamagedFile as exc:
            yield path, str(exc)


def listing(cache: FrameCache) -> dict[str, Any]:
    """Entries, bytes and count per (FrameSpec, codec), plus damaged and temporary files."""
    groups: dict[str, dict[str, Any]] = {}
    damaged = 0
    total = 0
    for path, info in _infos(cache):
        size = path.lstat().st_size
        total += size
        if isinstance(info, str):
            damaged += 1
            continue
        name = json.dumps({"codec": info.codec, "spec": info.spec}, sort_keys=True)
        g = groups.setdefault(name, {"codec": info.codec, "spec": info.spec, "entries": 0})
        g["entries"] += 1
        g["bytes"] = g.get("bytes", 0) + size
    temps = sum(1 for d in shards(cache.root) for _ in d.glob(f"*{TEMP_MARK}*"))
    return {
        "root": str(cache.root),
        "entries": sum(g["entries"] for g in groups.values()),
        "bytes": total,
        "damaged": damaged,
        "temp_files": temps,
        "per_spec": list(groups.values()),
    }


@dataclass
class PruneReport:
    """Paths removed, by reason; ``busy`` were skipped because a writer held their lock."""

    removed: dict[str, str] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)
    bytes: int = 0


def _dead_reason(info: EntryInfo | str) -> str | None:
    """Why an entry can never be served again, or None if it still can."""
    if isinstance(info, str):
        return f"damaged: {info}"
    src = info.source
    try:
        now = source_identity(src.path, "content" if src.sha256 else "stat")
    except VideoError:
        return "source vanished"
    if src.sha256 is not None:
        return None if now.sha256 == src.sha256 else "source content changed"
    if (now.size, now.mtime_ns) != (src.size, src.mtime_ns):
        return "source changed"
    return None


def prune(cache: FrameCache, *, everything: bool = False, dry_run: bool = False) -> PruneReport:
    """Remove stale temporaries, entries whose source changed or vanished, damaged entries,
    unused lock files; with ``everything`` every entry. Files a writer holds are skipped."""
    report = PruneReport()

    def drop(path: Path, reason: str, entry: Path) -> None:
        with _unless_busy(entry) as free:
            if not free:
                report.busy.append(str(path))
                return
            if not os.path.lexists(path):
                return
            report.removed[str(path)] = reason
            report.bytes += path.lstat().st_size
            if not dry_run:
                path.unlink()

    for path, info in _infos(cache):
        reason = "--all" if everything else _dead_reason(info)
        if reason:
            drop(path, reason, path)
    for folder, why in linked_folders(cache.root).items():
        report.removed[str(folder)] = why
        if not dry_run:
            folder.unlink(missing_ok=True)
    for d in shards(cache.root):
        for tmp in d.glob(f"*{TEMP_MARK}*"):
            # A temp whose key lock is free belongs to a writer that died.
            drop(tmp, "unfinished write", _temp_entry(tmp))
        for side in [*d.glob("*.lock"), *d.glob("*" + STAMP_SUFFIX)]:
            entry = side.with_name(side.name.rsplit(".", 1)[0] + SUFFIX)
            if not os.path.lexists(entry) and not dry_run:
                with _unless_busy(entry) as free:
                    if free:
                        side.unlink(missing_ok=True)
        if not dry_run and not any(d.iterdir()):
            d.rmdir()
    return report
