"""Shared setup for tests that start real engines on the tiny model (owned by the engine
tests; not a conftest, so it never affects other tests).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.video.types import Frames, VideoMeta

CACHE_ROOT = Path(__file__).resolve().parent.parent / ".cache" / "tests"

TINY_VLLM_OPTIONS = {
    "dtype": "float32",
    "enforce_eager": True,
    "max_num_batched_tokens": 256,
    "max_num_seqs": 4,
    "max_model_len": 2048,
}
"""vLLM CPU engine options for the tiny model in trainer tests."""


def write_index_video_set(
    root: Path, n_videos: int, per_video: int, frames: Any, source: str
) -> Path:
    """``n_videos`` index videos under ``root/videos`` (``frames(v)`` frames each) with
    ``per_video`` multiple-choice rows each, in ``root/set.jsonl``; returns ``root``."""
    import json

    from evalkit.testing.index_video import write_index_video

    (root / "videos").mkdir(exist_ok=True)
    rows = []
    for v in range(n_videos):
        write_index_video(root / "videos" / f"v{v}.mp4", frames(v), fps=8.0, width=160, height=120)
        rows += [
            {
                "problem_id": v * 100 + q,
                "problem": f"Question {q} about video {v}: which frame comes first?",
                "problem_type": "multiple choice",
                "options": ["A. first", "B. second", "C. third", "D. fourth"],
                "solution": f"<answer>{'ABCD'[q % 4]}</answer>",
                "path": f"v{v}.mp4",
                "data_type": "video",
                "data_source": source,
            }
            for q in range(per_video)
        ]
    (root / "set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def engine_env() -> dict[str, str]:
    """Environment for vLLM on CPU: small KV cache, offline, project-local caches."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CACHE_ROOT": str(CACHE_ROOT / "vllm"),
        "HF_HOME": str(CACHE_ROOT / "hf"),
        "XDG_CACHE_HOME": str(CACHE_ROOT / "xdg"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


def apply_engine_env(monkeypatch: Any) -> None:
    """Set :func:`engine_env` for the duration of a (module-scoped) fixture."""
    for key, value in engine_env().items():
        monkeypatch.setenv(key, value)
    for key in ("VLLM_CACHE_ROOT", "HF_HOME", "XDG_CACHE_HOME"):
        os.makedirs(os.environ[key], exist_ok=True)


def make_frames(t: int, h: int, w: int, seed: int = 0, fps: float = 2.0) -> Frames:
    """Random uint8 frames with metadata of a source clip sampled every other frame."""
    rng = np.random.default_rng(seed)
    array = rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8)
    indices = [2 * i for i in range(t)]
    src_fps = 2 * fps
    meta = VideoMeta(
        source_fps=src_fps,
        total_frames=2 * t,
        duration_s=2 * t / src_fps,
        indices=indices,
        timestamps=[i / src_fps for i in indices],
        height=h,
        width=w,
        source_height=h,
        source_width=w,
        decoder="synthetic",
    )
    return Frames(array=array, meta=meta)
