"""The IO stage's work for one sample: frames from the cache, the prompt, the Request.

Runs in the pipeline's IO threads. Frames come only from the frame cache (decoded once,
memory-mapped); a miss is built on the fly unless the run requires a warm cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.engines.base import Request, SamplingParams
from evalkit.errors import CacheError, PromptTooLong, VideoError
from evalkit.prompts import PromptPlan
from evalkit.sample import ImageRef, Sample, VideoRef
from evalkit.video.budget import FrameLog, FramePlan, frames_plan, plan_from_header
from evalkit.video.types import Frames, FrameSpec, ImageSpec

if TYPE_CHECKING:
    from evalkit.cache import FrameCache


class MediaGate(Protocol):
    """Media still on their way (``evalkit.hub.background.Prefetch``)."""

    def wait(self, paths: Iterable[str]) -> None:
        """Return once each of ``paths`` that is on its way is in place (or raise)."""


def video_spec(frame_spec: FrameSpec, ref: VideoRef) -> FrameSpec:
    """The FrameSpec a video is decoded under: the benchmark's, windowed as ``ref`` says."""
    if ref.start is not None or ref.end is not None:
        return frame_spec.window(ref.start, ref.end)
    return frame_spec


@dataclass
class RequestBuilder:
    """Turns a Sample into a Request (callable; thread-safe)."""

    cache: FrameCache
    frame_spec: FrameSpec
    image_spec: ImageSpec = field(default_factory=ImageSpec)
    prompt: PromptPlan = field(default_factory=PromptPlan)
    """The benchmark's prompt under the run's variant (evalkit's plain by default)."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    require_cache: bool = False
    system: str | None = None
    """System prompt for requests whose prompt brings none (an official one wins)."""
    miss_pool: Executor | None = None
    """Worker processes that decode misses (None: decode in the calling IO thread)."""
    max_prompt_tokens: int | None = None
    """The model's context (max_model_len): a video whose tokens cannot fit fails the
    sample before it is decoded (None: the engine says nothing, no check)."""
    frame_log: FrameLog | None = None
    """Where the frame count, size and binding budget of every loaded video go."""
    media_gate: MediaGate | None = None
    """Archives still being fetched: a sample's media are waited for (``evalkit.hub``)."""

    def __call__(self, sample: Sample) -> Request:
        if self.media_gate is not None:  # its archive may still be on its way
            from evalkit.bench.media import media_paths

            self.media_gate.wait(media_paths(sample))
        videos: list[Frames] = []
        hits: list[bool] = []
        for ref in sample.media:
            if isinstance(ref, VideoRef):
                frames, hit = self._video(sample, ref)
                videos.append(frames)
                hits.append(hit)
        return self.from_frames(sample, videos, hits)

    def from_frames(
        self, sample: Sample, videos: list[Frames], hits: list[bool] | None = None
    ) -> Request:
        """The Request of ``sample`` with its videos' frames loaded elsewhere (in media order).

        What a worker that maps cache entries itself calls: images are read here, the
        prompt rendered as :meth:`__call__` renders it.
        """
        from evalkit.video import load_image

        images = [
            load_image(ref.path, self.image_spec)
            for ref in sample.media
            if isinstance(ref, ImageRef)
        ]
        hits = hits or []
        if videos and sample.fields.get("subtitle_path"):
            from evalkit.bench.subtitles import with_subtitles

            # the subtitle lines shown are those of the frames actually sampled
            meta = videos[0].meta
            sample = with_subtitles(sample, meta.timestamps, meta.duration_s)
        metadata: dict[str, Any] = {"benchmark": sample.benchmark}
        if hits:
            metadata["cache_hit"] = all(hits)
        text, system = self.prompt.render(sample)
        return Request(
            id=sample.id,
            text=text,
            videos=videos,
            images=images,
            system=system or self.system,
            sampling=self.sampling,
            metadata=metadata,
            assistant_prefix=self.prompt.assistant_prefix(sample.task_type),
        )

    def _video(self, sample: Sample, ref: VideoRef) -> tuple[Frames, bool]:
        spec = video_spec(self.frame_spec, ref)
        frames = self.cache.lookup(ref, spec)
        if frames is not None:
            self._account(sample, spec, frames_plan(frames, spec))
            return frames, True
        if self.max_prompt_tokens is not None:  # from the header: before any decoding
            try:
                header_plan = plan_from_header(ref.path, spec)
            except (VideoError, ValueError):
                header_plan = None  # a header that says too little: decoding will tell
            if header_plan is not None:
                self._account(sample, spec, header_plan, log=False)
        if self.require_cache:
            raise CacheError(
                f"sample {sample.id}: {ref.path} is not in the frame cache for this spec "
                "(run `evalkit cache build` first, or drop --require-cache)"
            )
        if self.miss_pool is not None:
            from evalkit.cache.build import build_one, cache_args

            status, _, why = self.miss_pool.submit(
                build_one, cache_args(self.cache), ref.model_dump_json(), spec.model_dump_json()
            ).result()
            if status == "failed":
                raise VideoError(ref.path, f"sample {sample.id}: {why}")
        frames = self.cache.get(ref, spec)
        if self.frame_log is not None:
            self.frame_log.add(frames_plan(frames, spec))
        return frames, False

    def _account(self, sample: Sample, spec: FrameSpec, plan: FramePlan, log: bool = True) -> None:
        if log and self.frame_log is not None:
            self.frame_log.add(plan)
        if self.max_prompt_tokens is None:
            return
        # a lower bound: the video's tokens plus one per word of the question
        need = plan.tokens(spec) + len(sample.question.split())
        if need >= self.max_prompt_tokens:
            raise PromptTooLong(
                f"sample {sample.id}: the prompt needs at least {need} tokens (video: "
                f"{plan.nframes} frames of {plan.height}x{plan.width} = {plan.tokens(spec)} "
                f"tokens) but the model's context is {self.max_prompt_tokens} "
                "(max_model_len); lower --frames-max-frames, --frames-max-pixels or "
                "--frames-total-pixels, or raise --max-model-len"
            )
