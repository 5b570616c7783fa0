"""The pieces every process of a run builds alike: a benchmark as run (``BenchRun``), the
frame cache and a benchmark's request builder (the in-process runner and each replica of
a replicated run)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from evalkit.engines.base import Engine, SamplingParams
from evalkit.prompts import PromptPlan
from evalkit.request_builder import RequestBuilder
from evalkit.runconfig import RunConfig
from evalkit.sample import Sample
from evalkit.video.budget import FrameLog
from evalkit.video.types import FrameSpec


@dataclass
class BenchRun:
    """One benchmark of a run: its name, frame spec, sampling and samples."""

    name: str
    spec: Any  # BenchmarkSpec (an ad-hoc --data file gets a generated one)
    frame_spec: FrameSpec
    sampling: SamplingParams
    samples: list[Sample]
    prompt: PromptPlan = field(default_factory=PromptPlan)
    problems: list[Any] = field(default_factory=list)
    """Rows that did not load (or loaded repaired): evalkit.errors.Problem."""
    data_info: dict[str, Any] | None = None
    """For a benchmark made from a ``--data`` file: how its rows were matched/aggregated."""
    available: int | None = None
    """Samples the benchmark's data gave before ``--limit`` (recorded: a run of fewer is a
    slice, which ``evalkit repro`` says)."""
    media_root: str | None = None
    """The folder its media paths were resolved under (named when media are missing)."""


def make_cache(cfg: RunConfig) -> Any:
    """The run's frame cache (``FrameCache``) under the configured identity and codec."""
    from evalkit.cache import FrameCache

    return FrameCache(
        cfg.cache_root,
        identity=cfg.cache_identity,
        codec=cfg.cache_codec,
        jpeg_quality=cfg.cache_jpeg_quality,
    )


def make_builder(
    cfg: RunConfig,
    bench: BenchRun,
    cache: Any,
    engine: Engine,
    pool: ProcessPoolExecutor | None,
    frame_log: FrameLog,
) -> RequestBuilder:
    """The request builder of one benchmark (frames from ``cache``, misses on ``pool``)."""
    return RequestBuilder(
        cache=cache,
        frame_spec=bench.frame_spec,
        image_spec=bench.spec.images,
        prompt=bench.prompt,
        sampling=bench.sampling,
        require_cache=cfg.require_cache,
        miss_pool=pool,
        max_prompt_tokens=getattr(engine, "max_model_len", None),
        frame_log=frame_log,
    )
