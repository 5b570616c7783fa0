"""The frame cache: decoded, resized frames per (video, FrameSpec), built once, mmap'd after.

Layout: ``root/<key[:2]>/<key>.safetensors`` plus a ``<key>.lock`` beside it (and a
``<key>.verified`` stamp once its data checksums were checked, see ``integrity.py``). There is no
global index: a lookup is one stat of the source, one hash and one open, and writers of
different keys never wait on each other. Writers of one key take its file lock, so only
one decodes while the others wait and then read the finished file.

``ensure_specs`` fills the entries of one video under several FrameSpecs from ONE decode
(``evalkit.video.load_videos``): the same keys and files as one ``ensure`` per spec, so a
later single-spec ``get`` is a hit. It holds the locks of every key it builds (taken in key
order, so two such builders never wait on each other in a cycle).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

from filelock import FileLock

from evalkit.cache.codec import CODECS
from evalkit.cache.entry import SUFFIX, read_entry, write_entry
from evalkit.cache.fileformat import DamagedFile, not_plain
from evalkit.cache.integrity import FirstTouch, stamp_path
from evalkit.cache.key import Codec, Identity, SourceIdentity, as_ref, cache_key, source_identity
from evalkit.errors import CacheError, VideoError
from evalkit.sample import VideoRef
from evalkit.video.types import Frames, FrameSpec

log = logging.getLogger(__name__)

Decoder = Callable[[VideoRef, FrameSpec], Frames]
Ref = VideoRef | str | os.PathLike[str]


def default_root() -> Path:
    """``$EVALKIT_CACHE`` or ``~/.cache/evalkit/frames``."""
    env = os.environ.get("EVALKIT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "evalkit" / "frames"


def _load_videos(ref: VideoRef, specs: list[FrameSpec]) -> list[Frames]:
    # Imported on first use: decord and PyAV are heavy, and workers import only what they use.
    video = importlib.import_module("evalkit.video")
    frames: list[Frames] = video.load_videos(ref, specs)
    return frames


def lock_path(entry: Path) -> Path:
    """The per-key lock file beside an entry."""
    return entry.with_name(entry.name[: -len(SUFFIX)] + ".lock")


def key_lock(entry: Path) -> FileLock:
    """The lock of ``entry``'s key, in a real folder of the cache: a symbolic link in place of
    the entry's folder (the lock and the entry would be written where it points) or of the
    lock file (which filelock refuses, failing every build) is removed first, named in a
    warning."""
    for name in (entry.parent, lock_path(entry)):  # the folder first: the lock lies in it
        if name.is_symlink():
            log.warning(
                "frame cache: %s is %s, not the cache's own: removed", name, not_plain(name)
            )
            name.unlink(missing_ok=True)
    entry.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(lock_path(entry))


class FrameCache:
    """Frames per (video, FrameSpec) on disk; see the module docstring for the layout.

    ``decode`` turns (VideoRef, FrameSpec) into Frames (default: ``evalkit.video``'s
    decoder); it must be a module-level function when ``build_cache`` uses worker
    processes. With one, ``ensure_specs`` calls it once per spec (only the default
    decodes once for all specs).
    ``verify`` checks an entry's data checksums before this cache first serves it (a
    damaged entry is a miss: removed with a warning, then rebuilt); False skips that.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        codec: Codec = "raw",
        jpeg_quality: int = 90,
        identity: Identity = "stat",
        decode: Decoder | None = None,
        verify: bool = True,
    ) -> None:
        if codec not in CODECS:
            raise CacheError(f"unknown cache codec {codec!r}; use one of {', '.join(CODECS)}")
        if identity not in ("stat", "content"):
            raise CacheError(f"unknown cache identity {identity!r}; use 'stat' or 'content'")
        if not 1 <= jpeg_quality <= 100:
            raise CacheError(f"jpeg_quality must be within 1..100, got {jpeg_quality}")
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.codec: Codec = codec
        self.jpeg_quality = jpeg_quality
        self.identity: Identity = identity
        self.decode = decode
        self.verify = verify
        self.verifier = FirstTouch() if verify else None

    # -- keys and paths -------------------------------------------------------------

    def _locate(self, ref: Ref, spec: FrameSpec) -> tuple[VideoRef, SourceIdentity, str, Path]:
        vref = as_ref(ref)
        source = source_identity(vref.path, self.identity)
        return (vref, source, *self._key_path(vref, source, spec))

    def _key_path(self, ref: VideoRef, source: SourceIdentity, spec: FrameSpec) -> tuple[str, Path]:
        key = cache_key(source, ref, spec, self.codec, self.jpeg_quality)
        return key, self.root / key[:2] / (key + SUFFIX)

    def path_for(self, ref: Ref, spec: FrameSpec) -> Path:
        """Where the entry for (ref, spec) lives (whether or not it exists yet)."""
        return self._locate(ref, spec)[3]

    # -- reading ----------------------------------------------------------------------

    def lookup(self, ref: Ref, spec: FrameSpec) -> Frames | None:
        """The cached frames, or None on a miss; never decodes. A damaged entry is removed."""
        _, _, key, path = self._locate(ref, spec)
        frames, damage = self._try_read(path, key)
        if damage is not None:
            with key_lock(path):
                frames, damage = self._try_read(
                    path, key
                )  # a writer may have replaced it meanwhile
                if damage is not None:
                    _discard(path, damage)
        return frames

    def get(self, ref: Ref, spec: FrameSpec, *, require: bool = False) -> Frames:
        """The frames for (ref, spec), decoded and stored first on a miss.

        ``require=True`` never decodes: a miss raises CacheError naming the video.
        """
        return self._ensure(ref, spec, require=require)[0]

    def ensure(self, ref: Ref, spec: FrameSpec) -> tuple[str, int]:
        """Make sure the entry exists; return ("hit" | "built", its size in bytes)."""
        _, status, path = self._ensure(ref, spec, require=False)
        return status, path.stat().st_size

    def ensure_specs(self, ref: Ref, specs: Sequence[FrameSpec]) -> list[tuple[str, int]]:
        """``ensure`` for every spec, in order, decoding the video once for all the misses.

        A video that cannot be decoded raises the VideoError that ``ensure`` raises, for
        all specs (nothing is written then).
        """
        vref = as_ref(ref)
        source = source_identity(vref.path, self.identity)
        located = [(spec, *self._key_path(vref, source, spec)) for spec in specs]
        unique = {key: (spec, key, path) for spec, key, path in located}
        missing = [w for w in unique.values() if self._try_read(w[2], w[1])[0] is None]
        built = self._build_missing(vref, source, missing) if missing else set()
        done = []
        for _, key, path in located:
            if key in built:  # a spec given twice is built once: the second is a hit
                self._check_written(vref, key, path)
                built.discard(key)
                done.append(("built", path.stat().st_size))
            else:
                done.append(("hit", path.stat().st_size))
        return done

    def _ensure(self, ref: Ref, spec: FrameSpec, *, require: bool) -> tuple[Frames, str, Path]:
        vref, source, key, path = self._locate(ref, spec)
        frames, damage = self._try_read(path, key)
        if frames is not None:
            return frames, "hit", path
        if require:
            why = f"entry is damaged ({damage})" if damage else "no entry"
            raise CacheError(
                f"{vref.path}: not in the frame cache at {self.root} ({why}) under this "
                "FrameSpec; build it first with `evalkit cache build`"
            )
        built = self._build_missing(vref, source, [(spec, key, path)])
        return self._check_written(vref, key, path), "built" if built else "hit", path

    def _check_written(self, ref: VideoRef, key: str, path: Path) -> Frames:
        frames, damage = self._try_read(path, key)
        if frames is None:
            raise CacheError(f"{ref.path}: entry {path} unreadable right after writing: {damage}")
        return frames

    def _build_missing(
        self, ref: VideoRef, source: SourceIdentity, wanted: list[tuple[FrameSpec, str, Path]]
    ) -> set[str]:
        """Under the locks of ``wanted``'s keys, decode (once) and write the entries still
        missing; return the keys written."""
        with ExitStack() as locks:
            for _, _key, path in sorted(wanted, key=lambda w: w[1]):
                locks.enter_context(key_lock(path))
            todo = []
            for spec, key, path in wanted:
                frames, damage = self._try_read(path, key)  # another builder may have finished it
                if frames is None:
                    if damage is not None:
                        _discard(path, damage)
                    todo.append((spec, key, path))
            if todo:
                self._decode_and_write(ref, source, todo)
        return {key for _, key, _ in todo}

    def put(self, ref: Ref, spec: FrameSpec, frames: Frames) -> Path:
        """Store frames decoded elsewhere as the entry for (ref, spec); return its path.

        The caller vouches that ``frames`` are what ``spec`` yields for the file as it is now.
        """
        vref, source, key, path = self._locate(ref, spec)
        with key_lock(path):
            self._write(vref, spec, source, key, path, frames)
        return path

    def _write(
        self,
        ref: VideoRef,
        spec: FrameSpec,
        source: SourceIdentity,
        key: str,
        path: Path,
        frames: Frames,
    ) -> None:
        write_entry(
            path,
            key=key,
            frames=frames,
            spec=spec,
            ref=ref,
            source=source,
            codec=self.codec,
            jpeg_quality=self.jpeg_quality,
        )

    def _decode_and_write(
        self, ref: VideoRef, source: SourceIdentity, todo: list[tuple[FrameSpec, str, Path]]
    ) -> None:
        specs = [spec for spec, _, _ in todo]
        if self.decode is None:
            decoded = _load_videos(ref, specs)
        else:
            decoded = [self.decode(ref, spec) for spec in specs]
        after = source_identity(ref.path, "stat")
        if (after.size, after.mtime_ns) != (source.size, source.mtime_ns):
            # The frames may mix old and new content; storing them under either key is wrong.
            raise VideoError(ref.path, "file changed while it was being decoded; not cached")
        for (spec, key, path), frames in zip(todo, decoded, strict=True):
            self._write(ref, spec, source, key, path, frames)

    def _try_read(self, path: Path, key: str) -> tuple[Frames | None, str | None]:
        """(frames, None) on a hit, (None, None) when absent, (None, reason) when damaged."""
        try:
            frames, _ = read_entry(path, key, verifier=self.verifier)
        except FileNotFoundError:
            return None, None
        except DamagedFile as exc:
            return None, str(exc) or "damaged"
        return frames, None

    def entries(self) -> Iterator[Path]:
        """Every entry file under the root (complete files only, never temporaries)."""
        if not self.root.is_dir():
            return
        for sub in shards(self.root):
            yield from sorted(sub.glob("*" + SUFFIX))


def shards(root: Path) -> list[Path]:
    """The cache's two-letter folders under ``root`` (a symbolic link is none of them)."""
    if not root.is_dir():
        return []
    return [
        d for d in sorted(root.iterdir()) if len(d.name) == 2 and not d.is_symlink() and d.is_dir()
    ]


def _discard(path: Path, reason: str) -> None:
    log.warning("frame cache: damaged entry %s (%s): removed, it will be rebuilt", path, reason)
    path.unlink(missing_ok=True)
    stamp_path(path).unlink(missing_ok=True)
