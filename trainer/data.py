"""Training data: unified-schema rows as evalkit Samples, media budgets, a resumable order.

A row follows the EasyVideoR1 unified schema that evalkit already reads
(:mod:`evalkit.bench.unified`): ``problem``, ``problem_type``, ``options``, ``solution``,
``path`` / ``image_path``, ``data_type`` in {text, image, video}, plus the trainer's optional
``offline_output`` (the reference trajectory of mix-policy groups). Rows become
:class:`evalkit.sample.Sample` through :func:`evalkit.bench.unified.row_to_sample`, so the
rewards score exactly what evaluation would.

Frames come from the evalkit frame cache under a FrameSpec built from ``video_max_pixels``,
``video_max_frames`` and ``fps``; images get their own :class:`ImageSpec` budget
(``image_max_pixels``). What travels with a :class:`TrainItem` are cache entry PATHS
(:meth:`FrameCache.path_for`) and, once the cache is built, :class:`~trainer.frames.VideoHandle`
(path + VideoMeta), never decoded tensors: the consumer maps the file itself
(:class:`~trainer.frames.PromptLoader`).

The order is a seeded permutation per epoch; ``(epoch, position)`` is the data state a
checkpoint saves, so a resumed run reads the same items in the same order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.bench.files import read_rows
from evalkit.bench.unified import row_to_sample
from evalkit.engines.base import SamplingParams
from evalkit.errors import DataError
from evalkit.prompts import PromptPlan
from evalkit.request_builder import RequestBuilder
from evalkit.sample import Sample, VideoRef
from evalkit.video.types import FrameSpec, ImageSpec

from .config import DataConfig
from .frames import PromptRef, VideoHandle

if TYPE_CHECKING:
    from evalkit.cache import FrameCache

DATA_TYPES = ("text", "image", "video")
PROMPT_VARIANT = "thinking"
"""Training prompts ask for <think>...</think><answer>...</answer> (the format reward)."""


@dataclass
class TrainItem:
    """One training prompt: its evalkit Sample, offline trajectory and frame-cache paths."""

    sample: Sample
    index: int
    """Position of the row in the data file."""
    data_type: str
    offline_output: str | None = None
    cache_paths: list[str] = field(default_factory=list)
    """Frame-cache entries of the sample's videos (known before they are built)."""
    videos: list[VideoHandle] = field(default_factory=list)
    """Entry path + VideoMeta per video, set by :meth:`TrainData.build_cache`."""

    def prompt(self) -> PromptRef:
        """What rollout and the actor receive for this item (paths and metadata only)."""
        return PromptRef(self.sample, tuple(self.videos))


def load_items(path: str | Path, video_root: str | Path | None = None) -> list[TrainItem]:
    """Rows of a unified JSON/JSONL file as :class:`TrainItem`; DataError names the bad row."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: training data file not found")
    root = Path(video_root) if video_root is not None else None
    items: list[TrainItem] = []
    seen: dict[str, str] = {}
    for where, row in read_rows(file):
        if not isinstance(row, dict):
            raise DataError(f"{file}, {where}: a row must be a JSON object")
        items.append(_item(row, file, where, root, len(items)))
        sid = items[-1].sample.id
        if sid in seen:
            raise DataError(f"{file}, {where}: duplicate id {sid!r}, first at {seen[sid]}")
        seen[sid] = where
    if not items:
        raise DataError(f"{file}: no training rows")
    return items


def _item(row: dict[str, Any], file: Path, where: str, root: Path | None, index: int) -> TrainItem:
    kind = str(row.get("data_type") or ("video" if row.get("path") else "text"))
    if kind not in DATA_TYPES:
        raise DataError(
            f"{file}, {where}, field 'data_type': {kind!r} is not one of {', '.join(DATA_TYPES)}"
        )
    if kind != "text" and not (row.get("path") or row.get("image_path")):
        raise DataError(f"{file}, {where}, field 'path': a {kind} row needs a media path")
    offline = row.get("offline_output")
    if offline is not None and not isinstance(offline, str):
        raise DataError(f"{file}, {where}, field 'offline_output': must be text")
    sample = row_to_sample(row, file, where, root)
    return TrainItem(sample, index, kind, offline or None)


def frame_spec(cfg: DataConfig, factor: int = 28) -> FrameSpec:
    """The FrameSpec of training videos (``video_max_pixels`` per frame, ``video_max_frames``)."""
    top = cfg.video_max_pixels
    return FrameSpec(
        fps=cfg.fps,
        max_frames=cfg.video_max_frames,
        min_frames=min(4, cfg.video_max_frames),
        max_pixels=top,
        min_pixels=min(cfg.min_pixels or FrameSpec().min_pixels, top),
        factor=factor,
    )


def image_spec(cfg: DataConfig, factor: int = 28) -> ImageSpec:
    """The ImageSpec of training images (``image_max_pixels``), separate from video's budget."""
    top = cfg.image_max_pixels
    low = min(cfg.min_pixels or ImageSpec().min_pixels, top)
    return ImageSpec(max_pixels=top, min_pixels=low, factor=factor)


class TrainData:
    """Items in a seeded per-epoch order, batches of prompts, a saveable position."""

    def __init__(
        self,
        items: list[TrainItem],
        cfg: DataConfig,
        cache: FrameCache,
        seed: int = 0,
        factor: int = 28,
    ) -> None:
        self.items = items
        self.cfg = cfg
        self.cache = cache
        self.seed = seed
        self.frame_spec = frame_spec(cfg, factor)
        self.image_spec = image_spec(cfg, factor)
        self.epoch = 0
        self.position = 0
        for item in items:
            item.cache_paths = [str(p) for p in self._entry_paths(item.sample)]

    def _entry_paths(self, sample: Sample) -> list[Path]:
        return [self.cache.path_for(ref, self._spec_of(ref)) for ref in _videos(sample)]

    def _spec_of(self, ref: VideoRef) -> FrameSpec:
        if ref.start is None and ref.end is None:
            return self.frame_spec
        return self.frame_spec.window(ref.start, ref.end)

    def build_cache(self, workers: int = 0) -> None:
        """Decode every training video into the frame cache once (before training)."""
        refs = [r for item in self.items for r in _videos(item.sample)]
        plain = [r for r in refs if r.start is None and r.end is None]
        if plain:
            from evalkit.cache import build_cache

            report = build_cache(
                self.cache, plain, self.frame_spec, workers=workers, progress=False
            )
            if not report.ok:
                raise DataError(f"frame cache build failed: {report.summary()}")
        for ref in refs:
            if ref not in plain:
                self.cache.ensure(ref, self._spec_of(ref))
        for item in self.items:
            item.videos = [self._handle(ref) for ref in _videos(item.sample)]

    def _handle(self, ref: VideoRef) -> VideoHandle:
        spec = self._spec_of(ref)
        # a hit by construction (just built); its checksums are checked once, here
        meta = self.cache.get(ref, spec, require=True).meta
        return VideoHandle(str(self.cache.path_for(ref, spec)), meta, ref, spec)

    def order(self, epoch: int) -> list[int]:
        """The item order of ``epoch`` (a seeded permutation; file order if not shuffling)."""
        idx = list(range(len(self.items)))
        if self.cfg.shuffle:
            random.Random(f"{self.seed}/{epoch}").shuffle(idx)
        return idx

    def next_batch(self, size: int) -> list[TrainItem]:
        """The next ``size`` items, crossing into the next epoch when one ends."""
        out: list[TrainItem] = []
        while len(out) < size:
            order = self.order(self.epoch)
            out.append(self.items[order[self.position]])
            self.position += 1
            if self.position >= len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint stores to continue where this left off."""
        return {"epoch": self.epoch, "position": self.position, "n_items": len(self.items)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (the data file must be the same length)."""
        if int(state.get("n_items", len(self.items))) != len(self.items):
            raise DataError(
                f"checkpoint was taken on {state['n_items']} training items, the data now "
                f"has {len(self.items)}; resuming would read other items"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    def request_builder(self, sampling: SamplingParams) -> RequestBuilder:
        """Sample -> Request (frames read from the cache, the thinking prompt)."""
        return RequestBuilder(
            cache=self.cache,
            frame_spec=self.frame_spec,
            image_spec=self.image_spec,
            prompt=PromptPlan(variant=PROMPT_VARIANT),
            sampling=sampling,
        )


def _videos(sample: Sample) -> list[VideoRef]:
    return [m for m in sample.media if isinstance(m, VideoRef)]
