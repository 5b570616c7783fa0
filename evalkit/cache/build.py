"""Parallel cache building: N worker processes (forked from one preloaded server), each
decoding and writing its own videos.

The hot path has no inter-process synchronisation besides the per-key file lock: workers
get (video, spec) jobs from the executor and write their entries themselves; only a
small status tuple comes back. A video that fails records its reason and the build goes
on. Given several FrameSpecs, a job is one video under all of them, decoded once
(``FrameCache.ensure_specs``). A worker that dies outright (a decoder crash) breaks the
pool; the videos left are then retried one per fresh process, so only the video that
kills its process fails.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.cache.frame_cache import FrameCache, Ref
from evalkit.cache.key import as_ref
from evalkit.errors import CacheError, EvalkitError, VideoError, disk_error
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec

Outcome = tuple[str, int, str]  # (status "hit" | "built" | "failed", bytes, reason)


@dataclass
class BuildReport:
    """What one build did. ``built``/``hit`` hold a video label per entry (a video once
    per spec); keys of ``failed`` are video labels, values say why."""

    built: list[str] = field(default_factory=list)
    hit: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    bytes_built: int = 0
    """Size of the entries written by this build."""
    bytes_total: int = 0
    """Size of all entries of the videos that succeeded (built + hit)."""
    workers: int = 0

    @property
    def ok(self) -> bool:
        """True when no video failed."""
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary."""
        return {
            "built": len(self.built),
            "hit": len(self.hit),
            "failed": dict(self.failed),
            "seconds": round(self.seconds, 3),
            "bytes_built": self.bytes_built,
            "bytes_total": self.bytes_total,
            "workers": self.workers,
        }

    def summary(self) -> str:
        """A few lines for people."""
        lines = [
            f"{len(self.built)} built, {len(self.hit)} already cached, {len(self.failed)} failed"
            f" in {self.seconds:.1f} s with {self.workers} worker(s);"
            f" {self.bytes_built / 1e6:.1f} MB written, {self.bytes_total / 1e6:.1f} MB in cache"
        ]
        lines += [f"  FAILED {label}: {why}" for label, why in sorted(self.failed.items())]
        return "\n".join(lines)


def label(ref: VideoRef) -> str:
    """How a video is named in reports: its path, plus the window when there is one."""
    if ref.start is None and ref.end is None:
        return ref.path
    return f"{ref.path}[{ref.start or 0}:{'' if ref.end is None else ref.end}]"


def cache_args(cache: FrameCache) -> dict[str, Any]:
    """What a worker process needs to open the same cache (for :func:`build_one`)."""
    return {
        "root": str(cache.root),
        "codec": cache.codec,
        "jpeg_quality": cache.jpeg_quality,
        "identity": cache.identity,
        "decode": cache.decode,
        "verify": cache.verify,
    }


def build_one(cache_args: dict[str, Any], ref_json: str, spec_json: str) -> Outcome:
    """Worker entry point (module level, so spawn can pickle it): ensure one entry."""
    return build_specs_one(cache_args, ref_json, [spec_json])[0]


def build_specs_one(
    cache_args: dict[str, Any], ref_json: str, spec_jsons: Sequence[str]
) -> list[Outcome]:
    """Worker entry point: ensure one video's entries under every spec, from one decode;
    a video that fails, fails every spec with one reason."""
    cache = FrameCache(**cache_args)
    ref = VideoRef.model_validate_json(ref_json)
    specs = [FrameSpec.model_validate_json(s) for s in spec_jsons]
    try:
        done = cache.ensure_specs(ref, specs)
    except VideoError as exc:
        reason = exc.reason  # the report already names the video
    except EvalkitError as exc:
        reason = str(exc)
    except OSError as exc:  # a full or read-only cache folder: said as such, not as errno
        disk = disk_error(exc, cache.root, then="build again")
        reason = str(disk) if disk else f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a decoder bug must not stop the other videos
        reason = f"{type(exc).__name__}: {exc}"
    else:
        return [(status, nbytes, "") for status, nbytes in done]
    return [("failed", 0, reason)] * len(specs)


def _check_picklable(cache: FrameCache) -> None:
    try:
        pickle.dumps(cache.decode)
    except Exception:
        raise CacheError(
            f"decoder {cache.decode!r} cannot be sent to worker processes; use a module-level "
            "function or workers=0"
        ) from None


def usable_cpus() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def decoder_threads(workers: int) -> int:
    """Decoder threads per worker when ``workers`` decode side by side: cores / workers."""
    return max(1, usable_cpus() // max(1, workers))


BESIDE_ENGINE_NICE = 10
"""How much lower the CPU priority of decoding processes that run beside an engine's start
is (a run's warm-up, a sweep's decode; see :func:`beside_engine`)."""


@dataclass(frozen=True)
class Processes:
    """How a build decodes: ``workers`` processes of ``threads`` decoder threads each (None:
    the cores split between them), their niceness raised by ``nice``."""

    workers: int
    threads: int | None = None
    nice: int = 0


def beside_engine(workers: int) -> Processes:
    """Decoding processes that run beside an engine's start (a run's warm-up, a sweep's
    decode): at most the cores less one, which the start keeps (vLLM's start runs on about
    one core), at a lower CPU priority (:data:`BESIDE_ENGINE_NICE`: the start is the run's
    critical path, decoding is work ahead of it). A run's miss pool is not one of them:
    during generation the engine waits for what it decodes. ``perf/pipeline.py
    --cold-only`` on the 2-core box: a cold run with 2 decoders beside vLLM's start 44.1 s
    (the start 31.3 s, 23.9 s alone), with 1 decoder 37.2 s (the start 25.7 s, 24.5 s
    alone: about the run with every frame cached, 35.7 s); the lower priority gained 1.03x
    in both (45.3 -> 44.1 s, 38.6 -> 37.2 s)."""
    spare = max(1, usable_cpus() - 1)
    n = max(1, min(workers, spare))
    return Processes(n, max(1, spare // n), BESIDE_ENGINE_NICE)


def init_worker(threads: int, nice: int = 0) -> None:
    """Set up a decoding process: ``threads`` decoder (and torch) threads, its niceness
    raised by ``nice`` (a lower CPU priority; never refused)."""
    import sys

    from evalkit.video.decode import set_decoder_threads

    set_decoder_threads(threads)
    if nice > 0:
        os.nice(nice)
    # The reference resize runs on torch: its intra-op threads share the worker's cores.
    # Imported already where the process forked from the preloaded server (set here, as
    # the server read no OMP_NUM_THREADS), else read when the first resize imports it.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, threads)))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(max(1, threads))


# What every decoding process needs, imported once into the process it forks from.
_PRELOAD = [
    "evalkit.cache.build",
    "evalkit.video.decode",
    "evalkit.video.resize",
    "decord",
    "torch",
    "torchvision.transforms.v2.functional",
]


def decoding_pool(workers: int, threads: int | None = None, nice: int = 0) -> ProcessPoolExecutor:
    """Worker processes that decode videos, ``threads`` decoder threads each (default: the
    cores split between ``workers``), at ``nice`` lower priority (:data:`BESIDE_ENGINE_NICE`
    beside an engine).

    They fork from multiprocessing's fork server: one process per evalkit process, started
    (as a fresh interpreter) on the first pool, which imports the decoder and torch once
    (:data:`_PRELOAD`; a module that is not installed is left out). A pool after the first
    starts in milliseconds instead of each worker importing torch (about 3 s of a core each
    on the 2-core box): a run's miss pool, each checkpoint of a watch, the one pool per
    video that isolates a crashing file, a second run in one process (a 4-sample run with
    a scripted engine and one cache miss: 3.6 s each, spawned; 0.2 s from the second on,
    forked). Forking that server is
    safe where forking a decoding process is not: it runs no threads (the decoder's and
    torch's start in the workers). The workers see the environment of the server's start,
    and ``evalkit`` passes them all they read (:func:`cache_args`)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)  # read when the server starts
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=init_worker,
        initargs=(decoder_threads(workers) if threads is None else threads, nice),
    )


def _ping() -> None:
    """Proves a fresh worker process started (spawn re-imports the main module)."""


def largest_first(refs: list[VideoRef]) -> list[VideoRef]:
    """Unique refs, largest files first, so that one long video does not finish last alone."""
    unique = list(dict.fromkeys(refs))

    def size(r: VideoRef) -> int:
        try:
            return Path(r.path).stat().st_size
        except OSError:
            return 0

    return sorted(unique, key=size, reverse=True)


def build(
    cache: FrameCache,
    refs: Iterable[Ref],
    spec: FrameSpec | Sequence[FrameSpec],
    *,
    workers: int | Processes = 1,
    progress: bool = True,
) -> BuildReport:
    """Build the entries of many videos with ``workers`` processes (0 = in this process;
    :class:`Processes` for threads and priority, e.g. :func:`beside_engine`).

    ``spec`` may be several FrameSpecs: each video is then decoded once for all of them.
    """
    t0 = time.perf_counter()
    procs = workers if isinstance(workers, Processes) else Processes(workers)
    workers = procs.workers
    jobs = largest_first([as_ref(r) for r in refs])
    report = BuildReport(workers=workers)
    args = cache_args(cache)
    if workers > 0 and jobs:
        _check_picklable(cache)
    specs = [spec] if isinstance(spec, FrameSpec) else list(spec)
    spec_jsons = [s.model_dump_json() for s in specs]
    with progress_bar(len(jobs), progress) as advance:

        def record(ref: VideoRef, outcomes: list[Outcome]) -> None:
            for outcome in outcomes:
                record_outcome(report, ref, outcome)
            advance(label(ref))

        if workers <= 0:
            for ref in jobs:
                record(ref, build_specs_one(args, ref.model_dump_json(), spec_jsons))
        else:
            left = _run_pool(jobs, args, spec_jsons, procs, record)
            if left:  # the pool broke: isolate the rest so only the culprit fails
                _run_isolated(left, args, spec_jsons, procs, record)
    report.seconds = time.perf_counter() - t0
    return report


def record_outcome(report: BuildReport, ref: VideoRef, outcome: Outcome) -> None:
    """Add one video's outcome (from :func:`build_one`) to ``report``."""
    status, nbytes, reason = outcome
    if status == "failed":
        report.failed[label(ref)] = reason
    else:
        (report.built if status == "built" else report.hit).append(label(ref))
        report.bytes_total += nbytes
        report.bytes_built += nbytes if status == "built" else 0


Record = Callable[[VideoRef, list[Outcome]], None]


def _run_pool(
    jobs: list[VideoRef],
    args: dict[str, Any],
    spec_jsons: list[str],
    procs: Processes,
    record: Record,
) -> list[VideoRef]:
    """Run jobs on one pool of ``procs``; return those left unfinished if the pool broke."""
    left: list[VideoRef] = []
    n = min(procs.workers, len(jobs)) or 1
    with decoding_pool(n, procs.threads, procs.nice) as pool:
        futures: dict[Future[list[Outcome]], VideoRef] = {
            pool.submit(build_specs_one, args, ref.model_dump_json(), spec_jsons): ref
            for ref in jobs
        }
        for fut in as_completed(futures):
            try:
                record(futures[fut], fut.result())
            except BrokenProcessPool:
                left.append(futures[fut])
    return left


def _run_isolated(
    jobs: list[VideoRef],
    args: dict[str, Any],
    spec_jsons: list[str],
    procs: Processes,
    record: Record,
) -> None:
    workers = procs.workers
    per_worker = procs.threads or decoder_threads(workers)

    def one(ref: VideoRef) -> list[Outcome]:
        with decoding_pool(1, per_worker, procs.nice) as pool:
            try:
                pool.submit(_ping).result()
            except BrokenProcessPool:
                raise CacheError(
                    "cache build: worker processes cannot start. Each imports the main "
                    "script, so it must be importable: guard it with "
                    "`if __name__ == '__main__':` (or use workers=0)"
                ) from None
            try:
                job = pool.submit(build_specs_one, args, ref.model_dump_json(), spec_jsons)
                return job.result()
            except BrokenProcessPool:
                crashed: Outcome = ("failed", 0, "the decoding process crashed on this file")
                return [crashed] * len(spec_jsons)

    with ThreadPoolExecutor(max_workers=workers) as threads:
        futures = {threads.submit(one, ref): ref for ref in jobs}
        for fut in as_completed(futures):
            record(futures[fut], fut.result())


@contextmanager
def progress_bar(total: int, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr; yields ``advance(label)`` (a file's path: its name shown)."""
    from evalkit.terminal import progress_bar as bar

    with bar("cache build", total, enabled) as advance:
        yield lambda name: advance(Path(name).name)
