"""The IO stage: a thread pool over mmap'd cache entries vs aiofiles, measured.

aiofiles is the usual answer to "file IO blocks the event loop". This script measures it
against what the pipeline does (``Pipeline._one``: ``run_in_executor`` on a small thread
pool that opens the cache entry, maps it and hands the engine a numpy view) and against
the naive blocking load on the loop, on the same cache entries, warm (in the page cache)
and cold (each entry's pages evicted with posix_fadvise(DONTNEED) first).

Every arm loads all entries with 4 loads in flight and reads one byte per page of every
frame, as an engine copying the frames into its input would. A ticker coroutine sleeping
1 ms records how late the loop wakes it: the lag that prefill/decode bookkeeping of the
engine's own coroutines would suffer. The aiofiles arm reads the file into bytes (aiofiles
runs each read in the default thread pool) and parses it with safetensors.numpy.load.

Prints progress on stderr and ONE JSON object last on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalkit.cache import FrameCache
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec

sys.path.insert(0, str(Path(__file__).parent))  # perf/ itself, also when imported
from cache import synthetic_frames
from cache import touch_pages as touch

SPEC = FrameSpec(fps=2.0, max_frames=64, max_pixels=150528)
IN_FLIGHT = 4


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_entries(root: Path, n: int, shape: tuple[int, int, int, int]) -> list[VideoRef]:
    """``n`` cache entries of random frames (no decoding: the IO stage is under test)."""
    cache = FrameCache(root / "cache")
    frames = synthetic_frames(shape)  # perf/cache.py's: random frames, consistent meta
    refs = []
    for i in range(n):
        src = root / f"source_{i}.bin"
        src.write_bytes(f"stands in for video {i}".encode())
        ref = VideoRef(path=str(src))
        cache.put(ref, SPEC, frames)
        refs.append(ref)
    time.sleep(2.5)  # integrity stamps are written only for settled files
    for ref in refs:
        cache.get(ref, SPEC, require=True)  # full check once, stamped, as after a build
    return refs


def evict(paths: list[Path]) -> None:
    gc.collect()  # drop earlier mappings, or DONTNEED cannot evict their pages
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


async def _ticker(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t0 - 0.001)


async def run_arm(load: Callable[[VideoRef], Awaitable[int]], refs: list[VideoRef]) -> dict:
    """All entries through ``load`` with IN_FLIGHT at once; wall time and loop lag."""
    lags: list[float] = []
    stop = asyncio.Event()
    tick = asyncio.create_task(_ticker(lags, stop))
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(ref: VideoRef) -> int:
        async with gate:
            return await load(ref)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(r) for r in refs))
    wall = time.perf_counter() - t0
    stop.set()
    await tick
    lags.sort()
    return {
        "ms_per_entry": wall * 1e3 / len(refs),
        "loop_max_lag_ms": lags[-1] * 1e3 if lags else 0.0,
        "loop_p99_lag_ms": lags[int(0.99 * (len(lags) - 1))] * 1e3 if lags else 0.0,
    }


def arms(root: Path, pool: ThreadPoolExecutor) -> dict[str, Callable[[VideoRef], Awaitable[int]]]:
    import aiofiles
    from safetensors.numpy import load as st_load

    def mmap_load(ref: VideoRef) -> int:
        cache = FrameCache(root / "cache")  # a fresh one per load: no in-process memo
        return touch(cache.get(ref, SPEC, require=True).array)

    async def threadpool(ref: VideoRef) -> int:
        return await asyncio.get_running_loop().run_in_executor(pool, mmap_load, ref)

    async def blocking(ref: VideoRef) -> int:
        return mmap_load(ref)

    async def aiofiles_read(ref: VideoRef) -> int:
        path = FrameCache(root / "cache").path_for(ref, SPEC)
        async with aiofiles.open(path, "rb") as f:
            data = await f.read()
        return touch(st_load(data)["frames"])

    return {"threadpool_mmap": threadpool, "blocking_on_loop": blocking, "aiofiles": aiofiles_read}


def measure(root: Path, refs: list[VideoRef], repeats: int) -> dict[str, Any]:
    paths = [FrameCache(root / "cache").path_for(r, SPEC) for r in refs]
    got: dict[str, list[dict]] = {}
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        table = arms(root, pool)
        for _ in range(repeats):  # interleaved, so a busy machine hits every arm alike
            for name, load in table.items():
                for temp in ("warm", "cold"):
                    if temp == "cold":
                        evict(paths)
                    else:
                        asyncio.run(run_arm(load, refs))  # bring every page in first
                    got.setdefault(f"{name}_{temp}", []).append(asyncio.run(run_arm(load, refs)))
    out: dict[str, Any] = {}
    for arm, runs in got.items():
        for key in runs[0]:
            out[f"{arm}_{key}"] = round(statistics.median(r[key] for r in runs), 3)
    for temp in ("warm", "cold"):
        base = out[f"threadpool_mmap_{temp}_ms_per_entry"]
        out[f"aiofiles_over_threadpool_{temp}_ratio"] = round(
            out[f"aiofiles_{temp}_ms_per_entry"] / base, 2
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "io_stage")
    ap.add_argument("--entries", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="4 small entries, 1 repeat")
    args = ap.parse_args()
    shape = (16, 224, 224, 3) if args.quick else (64, 336, 448, 3)
    n, repeats = (4, 1) if args.quick else (args.entries, args.repeats)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    log(f"writing {n} entries of {shape} ...")
    refs = make_entries(args.out, n, shape)
    res: dict[str, Any] = {
        "entries": n,
        "entry_bytes": FrameCache(args.out / "cache").path_for(refs[0], SPEC).stat().st_size,
        "loads_in_flight": IN_FLIGHT,
        "cold_method": "posix_fadvise(POSIX_FADV_DONTNEED) on every entry before the pass",
    }
    res.update(measure(args.out, refs, repeats))
    shutil.rmtree(args.out, ignore_errors=True)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
