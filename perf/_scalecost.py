"""Measured per-sample and per-video costs for perf/scale.py's simulation.

Costs are measured here with evalkit's own frame cache on generated H.264 clips (a
scrolling texture, perf/cache.py's ``generate``) of a few lengths, then fitted as lines:

- evaluation, per question: a warm ``FrameCache.get`` as a replica does it before each
  request, timed until every frame byte is in memory; fitted on the frame count
  (``fixed + per_frame x frames``). The engine's own prefill on a GPU also grows about
  linearly in the frames (visual tokens), so the shape, not the scale, is what the
  simulation uses: ratios of wall times do not depend on the unit.
- cache build, per video: ``FrameCache.ensure`` on a miss (decode, resize, write), fitted
  on the video's minutes (``fixed + per_minute x minutes``).
"""

from __future__ import annotations

import gc
import importlib.util
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PERF = Path(__file__).resolve().parent

# LVBench's frame setting (benchmarks/lvbench.yaml): 2 fps, at most 768 frames.
FPS, MAX_FRAMES, MIN_FRAMES, MAX_PIXELS = 2.0, 768, 4, 602112


def log(msg: str) -> None:
    """Progress on stderr (stdout carries only the JSON)."""
    print(f"[perf/scale] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Line:
    """``fixed + slope x x``, fitted by least squares."""

    fixed: float
    slope: float

    def __call__(self, x: float) -> float:
        return max(self.fixed + self.slope * x, 0.0)


def fit(xs: list[float], ys: list[float]) -> Line:
    """The least-squares line through (xs, ys) (a negative intercept is clipped to 0)."""
    slope, fixed = statistics.linear_regression(xs, ys)
    return Line(max(fixed, 0.0), slope)


def frames_for(seconds: float) -> int:
    """Frames sampled from a video of ``seconds`` under the LVBench setting."""
    return min(max(math.ceil(seconds * FPS), MIN_FRAMES), MAX_FRAMES)


def _generator() -> Callable[..., Path]:
    spec = importlib.util.spec_from_file_location("perf_cache", PERF / "cache.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate: Callable[..., Path] = module.generate
    return generate


def _best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)  # the least disturbed by the other jobs sharing the cores


def measure(
    seconds: list[float], size: tuple[int, int], out: Path, repeats: int = 3
) -> dict[str, Any]:
    """Build and load the cache entry of one clip per length; fit both cost lines."""
    from evalkit.cache import FrameCache
    from evalkit.sample import VideoRef
    from evalkit.video.types import FrameSpec

    spec = FrameSpec(fps=FPS, max_frames=MAX_FRAMES, max_pixels=MAX_PIXELS)
    generate = _generator()
    out.mkdir(parents=True, exist_ok=True)
    build_s, load_s, frames = [], [], []
    refs = [
        VideoRef(path=str(generate(out / f"scale_{int(x)}s_{size[0]}x{size[1]}.mp4", x, *size)))
        for x in seconds
    ]
    with tempfile.TemporaryDirectory(prefix="evalkit-scale-") as tmp:
        roots = iter(Path(tmp) / f"c{i}" for i in range(10**6))
        _fresh_build(FrameCache(next(roots)), refs[0], spec)  # imports, decoder start-up
        for secs, ref in zip(seconds, refs, strict=True):
            build, n, load = _clip(FrameCache, ref, spec, roots, repeats)
            build_s.append(build)
            load_s.append(load)
            frames.append(n)
            log(f"{secs:.0f} s clip: build {build:.2f} s, {n} frames, load {load:.4f} s")
    per_sample = fit([float(f) for f in frames], load_s)
    per_video = fit([s / 60 for s in seconds], build_s)
    return {
        "cost_model_source": "evalkit FrameCache on generated H.264 clips, measured here",
        "cost_model_clip_seconds": seconds,
        "cost_model_clip_size": f"{size[0]}x{size[1]} 30 fps",
        "cost_model_clip_frames": frames,
        "cost_model_load_s": [round(x, 5) for x in load_s],
        "cost_model_build_s": [round(x, 4) for x in build_s],
        "cost_model_fixed_s": round(per_sample.fixed, 6),
        "cost_model_s_per_frame": round(per_sample.slope, 7),
        "cache_cost_model_fixed_s": round(per_video.fixed, 4),
        "cache_cost_model_s_per_video_minute": round(per_video.slope, 4),
        "frame_setting": f"fps {FPS}, {MIN_FRAMES}..{MAX_FRAMES} frames (LVBench's)",
    }


def _clip(
    cache_cls: Any, ref: Any, spec: Any, roots: Iterator[Path], repeats: int
) -> tuple[float, int, float]:
    """Best build seconds (fresh cache each time), frame count, best load seconds (a fresh
    FrameCache each time, as a new replica process reads it: checksums checked on first
    touch)."""
    build = _best(lambda: _fresh_build(cache_cls(next(roots)), ref, spec), repeats)
    root = next(roots)
    n = int(cache_cls(root).get(ref, spec).array.shape[0])
    # a load takes milliseconds: many tries, so the best one is one no other job disturbed
    load = _best(lambda: _touch(cache_cls(root).get(ref, spec)), 10 * repeats)
    return build, n, load


def _fresh_build(cache: Any, ref: Any, spec: Any) -> None:
    status, _ = cache.ensure(ref, spec)
    assert status == "built", status


def _touch(frames: Any) -> int:
    flat = frames.array.reshape(-1)
    return int(flat[::4096].sum(dtype="uint64"))  # every page read, as an engine would


def sample_cost(model: dict[str, Any]) -> Callable[[float], float]:
    """Seconds per question on a video of the given length, from the fitted model."""
    line = Line(model["cost_model_fixed_s"], model["cost_model_s_per_frame"])
    return lambda secs: line(frames_for(secs))


def video_cost(model: dict[str, Any]) -> Callable[[float], float]:
    """Seconds to build one video's cache entry, from the fitted model."""
    line = Line(model["cache_cost_model_fixed_s"], model["cache_cost_model_s_per_video_minute"])
    return lambda secs: line(secs / 60)
