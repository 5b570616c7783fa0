"""What travels with a training batch: cache entry PATHS and VideoMeta, never frames.

The driver hands rollout and the actor small picklable :class:`PromptRef` objects (the
Sample and one :class:`VideoHandle` per video: tens of bytes of path plus the VideoMeta);
the consumer (rollout request building, the actor's log-prob and update inputs) loads the
frames itself through a :class:`FrameSource` when it needs them:

- ``cache`` (the default): maps the entry file with evalkit's own reader
  (:func:`evalkit.cache.entry.read_entry`: header checks, first-touch checksums, zero-copy
  raw frames), so a worker on the same file system pays one open + mmap per video.
- ``decode``: decodes the source video again at the same FrameSpec, in every stage that
  needs frames, as verl and EasyVideoR1 do; it exists for ``perf/train_step.py``'s
  comparison arm, not for training runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from evalkit.cache.entry import read_entry
from evalkit.cache.fileformat import DamagedFile
from evalkit.cache.integrity import FirstTouch
from evalkit.errors import CacheError, DataError
from evalkit.registry import Registry
from evalkit.sample import Sample, VideoRef
from evalkit.video.types import Frames, FrameSpec, VideoMeta

if TYPE_CHECKING:
    from evalkit.engines.base import Request
    from evalkit.request_builder import RequestBuilder


@dataclass(frozen=True)
class VideoHandle:
    """One video of a prompt as a worker receives it: where its frames are, what they are."""

    entry: str
    """Path of the frame-cache entry (``FrameCache.path_for(ref, spec)``)."""
    meta: VideoMeta
    """The entry's VideoMeta (frame indices, timestamps, size) as it was when built."""
    ref: VideoRef
    """The source video (and its window), for a source that decodes instead."""
    spec: FrameSpec
    """The FrameSpec the entry was made under (the video's window applied)."""


@dataclass(frozen=True)
class PromptRef:
    """One training prompt as handed to rollout and the actor: no pixel in it."""

    sample: Sample
    videos: tuple[VideoHandle, ...] = ()
    """In the order of the sample's VideoRefs."""


class FrameSource(Protocol):
    """Turns a :class:`VideoHandle` into frames on the consumer's side."""

    def load(self, video: VideoHandle) -> Frames:
        """The frames of ``video`` (T x H x W x 3 uint8 and their VideoMeta)."""
        ...


FRAME_SOURCES: Registry[type[FrameSource]] = Registry("frame source")


@FRAME_SOURCES("cache")
class CacheFrames:
    """Frames mapped from the cache entry at ``video.entry`` (zero-copy for raw entries).

    ``verify`` checks an entry's data checksums the first time this process serves it
    (stamped beside the file, so another process skips the pass), as FrameCache does.
    """

    def __init__(self, verify: bool = True) -> None:
        self.verifier = FirstTouch() if verify else None

    def load(self, video: VideoHandle) -> Frames:
        """Map the entry; CacheError when it is gone, damaged or rebuilt since batching."""
        try:
            frames, _ = read_entry(Path(video.entry), verifier=self.verifier)
        except FileNotFoundError:
            raise CacheError(
                f"{video.ref.path}: frame-cache entry {video.entry} is gone (pruned while "
                "training?); rebuild the cache and restart from the last checkpoint"
            ) from None
        except DamagedFile as exc:
            raise CacheError(
                f"{video.ref.path}: frame-cache entry {video.entry} is damaged ({exc}); "
                "run `evalkit cache verify` and restart from the last checkpoint"
            ) from None
        if frames.meta != video.meta:
            raise CacheError(
                f"{video.ref.path}: frame-cache entry {video.entry} holds other frames than "
                "when the batch was made (rebuilt meanwhile?); restart the step"
            )
        return frames


@FRAME_SOURCES("decode")
class DecodeFrames:
    """Frames decoded from the source video on every call (the reference trainers' way)."""

    def load(self, video: VideoHandle) -> Frames:
        """Decode ``video.ref`` at ``video.spec`` (decord or PyAV, as evalkit decodes)."""
        from evalkit.video import load_video

        return load_video(video.ref, video.spec)


def frame_source(name: str) -> FrameSource:
    """The frame source registered as ``name`` (``cache`` or ``decode``)."""
    return FRAME_SOURCES.get(name)()


@dataclass
class PromptLoader:
    """The consumer side: a :class:`PromptRef` -> the Request an engine or the actor takes."""

    builder: RequestBuilder
    source: FrameSource

    def request(self, prompt: PromptRef) -> Request:
        """Load the prompt's frames from ``source`` and render its Request."""
        wanted = sum(isinstance(m, VideoRef) for m in prompt.sample.media)
        if wanted != len(prompt.videos):
            raise DataError(
                f"sample {prompt.sample.id}: {wanted} videos but {len(prompt.videos)} frame "
                "handles; build the frame cache (TrainData.build_cache) before batching"
            )
        frames = [self.source.load(v) for v in prompt.videos]
        return self.builder.from_frames(prompt.sample, frames)
