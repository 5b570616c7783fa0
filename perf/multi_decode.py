"""One decode for several frame specs: decode seconds of 4 specs built separately vs together.

The 4 specs are what a sweep of 2 frame counts x 2 pixel budgets asks for. "Separate" is
``load_video`` once per spec (what 4 runs, or 4 cache builds, do today); "multi" is one
``load_videos`` over all 4 (the union of their frames decoded once at source resolution,
each spec resized from it). Both are timed in this process, alternated, best of
``--rounds`` (wall and CPU seconds: on a shared box the CPU ratio is the steadier one);
the frames of both are checked to be bit-identical. The time spent in the resize (the
same work in both: each spec's frames are resized from source frames either way) is
measured apart, so ``*_read_s`` is the decoding that the shared decode saves. The video
is made once by perf/cache.py's generator into ``perf/out/`` (H.264 ultrafast, 720p, 2 s
keyframe interval, a scrolling texture) and reused.

Prints progress on stderr and ONE JSON object last on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

PERF = Path(__file__).resolve().parent
sys.path.insert(0, str(PERF))

from cache import generate  # noqa: E402  (perf/cache.py: the shared synthetic-video maker)

from evalkit.sample import VideoRef  # noqa: E402
from evalkit.video import FrameSpec, load_video, load_videos  # noqa: E402
from evalkit.video import load as load_module  # noqa: E402

P28 = 28 * 28
SPECS = [FrameSpec(nframes=n, max_pixels=p) for n in (32, 64) for p in (256 * P28, 768 * P28)]


def log(msg: str) -> None:
    print(f"[perf/multi_decode] {msg}", file=sys.stderr, flush=True)


_resize_s = [0.0]


def _timed_resize(frames: np.ndarray, height: int, width: int, method: str = "torchvision") -> Any:
    t0 = time.perf_counter()
    out = _real_resize(frames, height, width, method)
    _resize_s[0] += time.perf_counter() - t0
    return out


_real_resize = load_module.resize_frames
load_module.resize_frames = _timed_resize  # the loader's own resize, timed


def timed(fn: Any) -> tuple[float, float, float, Any]:
    """(wall s, CPU s of this process, wall s in the resize, result)."""
    _resize_s[0] = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, _resize_s[0], out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=180.0, help="video length (default 180)")
    p.add_argument("--rounds", type=int, default=1, help="alternated separate/multi rounds")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="decoder and torch threads (default 1: a cache build worker's share of a "
        "2-core box; 0 = the libraries' own choice)",
    )
    p.add_argument("--out", type=Path, default=PERF / "out")
    args = p.parse_args()
    if args.threads:
        import torch

        from evalkit.video.decode import set_decoder_threads

        set_decoder_threads(args.threads)
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"long_{int(args.seconds)}s_1280x720_30fps.mp4"
    ref = VideoRef(path=str(generate(args.out / name, args.seconds, 1280, 720)))
    _real_resize(np.zeros((2, 64, 64, 3), np.uint8), 56, 56)  # torch's start-up, untimed
    separate, multi = [], []
    for r in range(args.rounds):
        s_wall, s_cpu, s_resize, alone = timed(lambda: [load_video(ref, spec) for spec in SPECS])
        m_wall, m_cpu, m_resize, together = timed(lambda: load_videos(ref, SPECS))
        separate.append((s_wall, s_cpu, s_resize))
        multi.append((m_wall, m_cpu, m_resize))
        log(
            f"round {r + 1}: separate {s_wall:.1f} s ({s_resize:.1f} s resizing), "
            f"multi {m_wall:.1f} s ({m_resize:.1f} s resizing)"
        )
    identical = all(
        np.array_equal(a.array, t.array) and a.meta == t.meta
        for a, t in zip(alone, together, strict=True)
    )
    # Each figure is its own best round (the wall-time round sets the resize/read split).
    best_s, best_m = list(min(separate)), list(min(multi))
    best_s[1], best_m[1] = min(r[1] for r in separate), min(r[1] for r in multi)
    requested = sum(len(f.meta.indices) for f in alone)
    union = len({i for f in alone for i in f.meta.indices})
    res: dict[str, Any] = {
        "video_seconds": args.seconds,
        "video_size": "1280x720",
        "specs": [
            {
                "nframes": s.nframes,
                "max_pixels": s.max_pixels,
                "out_hw": [f.meta.height, f.meta.width],
            }
            for s, f in zip(SPECS, alone, strict=True)
        ],
        "frames_requested_total": requested,
        "frames_union": union,
        "separate_decode_s": round(best_s[0], 3),
        "multi_decode_s": round(best_m[0], 3),
        "separate_decode_cpu_s": round(best_s[1], 3),
        "multi_decode_cpu_s": round(best_m[1], 3),
        "multi_over_separate_decode_s_ratio": round(best_m[0] / best_s[0], 3),
        "multi_over_separate_decode_cpu_s_ratio": round(best_m[1] / best_s[1], 3),
        "separate_resize_s": round(best_s[2], 3),
        "multi_resize_s": round(best_m[2], 3),
        "separate_read_s": round(best_s[0] - best_s[2], 3),
        "multi_read_s": round(best_m[0] - best_m[2], 3),
        "multi_over_separate_read_s_ratio": round(
            (best_m[0] - best_m[2]) / (best_s[0] - best_s[2]), 3
        ),
        "bit_identical": identical,
        "rounds": args.rounds,
        "separate_rounds_s": [round(r[0], 2) for r in separate],
        "multi_rounds_s": [round(r[0], 2) for r in multi],
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(res))


if __name__ == "__main__":
    main()
