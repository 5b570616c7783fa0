"""Starting a pool of decoding processes: spawned (each worker a fresh interpreter that
imports the decoder, and torch for the resize, itself) vs forked from multiprocessing's
fork server (what ``evalkit.cache.build.decoding_pool`` does: one server per process that
imported them once).

Every round opens a pool of one worker, decodes one short clip into an empty cache (4
frames, resized: the reference resize runs on torch) and closes the pool, as a run's miss
pool does; a watch, a sweep's decode, the isolated rebuild of a crashing file and every run
after the first in one process start pools so. The first round of each arm pays its
imports (the fork server's start); the later ones show what a pool start costs from then on.

Prints progress on stderr and ONE JSON object last on stdout.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from evalkit.cache import FrameCache
from evalkit.cache import build as cache_build
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec

SPEC = FrameSpec(nframes=4, min_pixels=56 * 56, max_pixels=112 * 112)


def spawned_pool() -> ProcessPoolExecutor:
    """One spawned worker, set up as evalkit's decoding workers are."""
    return ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=cache_build.init_worker,
        initargs=(1, 0),
    )


def forked_pool() -> ProcessPoolExecutor:
    return cache_build.decoding_pool(1, threads=1)


def one_round(make: str, video: Path, root: Path) -> float:
    """Seconds from opening a pool to its worker's decoded entry, pool closed."""
    cache = FrameCache(root)
    ref = VideoRef(path=str(video)).model_dump_json()
    t0 = time.perf_counter()
    with spawned_pool() if make == "spawn" else forked_pool() as pool:
        status, _, why = pool.submit(
            cache_build.build_one, cache_build.cache_args(cache), ref, SPEC.model_dump_json()
        ).result()
    took = time.perf_counter() - t0
    if status != "built":
        raise SystemExit(f"decode failed: {why}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="pools opened per arm (>= 2)")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2 (the first pays the imports)")
    from evalkit.testing.index_video import write_index_video

    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "clip.mp4"
        write_index_video(video, 30, fps=10.0, width=224, height=168)
        seconds: dict[str, list[float]] = {}
        for arm in ("spawn", "forkserver"):
            seconds[arm] = []
            for i in range(args.rounds):
                took = one_round(arm, video, Path(tmp) / f"cache-{arm}-{i}")
                seconds[arm].append(took)
                print(f"{arm} round {i}: {took:.2f} s", file=sys.stderr, flush=True)
    later = {arm: statistics.median(s[1:]) for arm, s in seconds.items()}
    print(
        json.dumps(
            {
                "rounds": args.rounds,
                "spawn_first_s": round(seconds["spawn"][0], 3),
                "spawn_next_median_s": round(later["spawn"], 3),
                "forkserver_first_s": round(seconds["forkserver"][0], 3),
                "forkserver_next_median_s": round(later["forkserver"], 3),
                "next_pool_speedup_ratio": round(later["spawn"] / later["forkserver"], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
