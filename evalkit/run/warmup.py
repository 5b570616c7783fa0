"""Warming the frame cache while the engine starts.

vLLM takes 15-60 s to start on a CPU; a run used to decode its first video only after
that. :class:`CacheWarmup` decodes the pending samples' videos, in the order the pipeline
will ask for them, on decoding processes of lower CPU priority while the engine starts
(:func:`warming`), so a cold run costs about max(engine start, decoding) + generation
instead of their sum.

The warm-up writes ordinary cache entries through ``build_one`` (per-key file lock,
atomic rename), so the pipeline finds hits where it was, and waits on the lock, then
hits, where a decode is still running. It never decides a sample's fate: a video that
fails here is simply not cached, the pipeline decodes it again and records the sample
failed with the error it always gives. Once the engine is up the warm-up submits
nothing more (at most ``workers`` decodes it started finish), so the pipeline's own
misses never queue behind it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future

from evalkit.cache import FrameCache
from evalkit.cache.build import Outcome, build_one, cache_args
from evalkit.request_builder import video_spec
from evalkit.run.config import RunConfig
from evalkit.run.plan import BenchRun, RunPlan
from evalkit.rundir import RunDir
from evalkit.sample import VideoRef
from evalkit.video.types import FrameSpec

log = logging.getLogger(__name__)

Job = tuple[VideoRef, FrameSpec]


def warms_up(cfg: RunConfig) -> bool:
    """Whether a run that starts its engine decodes ahead meanwhile (a run given its engine
    has no start to overlap and never asks): not in ``--mode sync`` (the vanilla baseline, the
    comparison arm, stays as other harnesses run), not under ``--require-cache`` (a run
    that must not decode)."""
    return cfg.mode != "sync" and not cfg.require_cache


def pending_videos(rundir: RunDir, benches: Sequence[BenchRun], *, retry_failed: bool) -> list[Job]:
    """Every (video, FrameSpec) the run's pending samples need, in pipeline order, once."""
    jobs: dict[Job, None] = {}
    for bench in benches:
        done: set[str] = set()
        if rundir.store_path(bench.name).exists():
            with rundir.store(bench.name) as store:
                done = store.done_ids(include_failed=not retry_failed)
        for sample in bench.samples:
            if sample.id in done:
                continue
            for ref in sample.media:
                if isinstance(ref, VideoRef):
                    jobs.setdefault((ref, video_spec(bench.frame_spec, ref)), None)
    return list(jobs)


def warmup_jobs(runs: Iterable[tuple[RunPlan, RunDir]]) -> list[Job]:
    """What a warm-up decodes for these runs (one, or a replicated sweep's settings): the
    pending videos of each run that warms up at all (``warms_up``), in pipeline order, once."""
    jobs: dict[Job, None] = {}
    for plan, rundir in runs:
        if warms_up(plan.config):
            retry = plan.config.retry_failed
            jobs.update(dict.fromkeys(pending_videos(rundir, plan.benches, retry_failed=retry)))
    return list(jobs)


class CacheWarmup:
    """Feeds ``jobs`` to ``pool`` (``build_one`` each), at most ``workers`` at a time, from
    a daemon thread, until the jobs run out or :meth:`stop` is called."""

    def __init__(
        self, cache: FrameCache, jobs: Sequence[Job], pool: Executor, workers: int
    ) -> None:
        self.cache, self.jobs, self.pool = cache, list(jobs), pool
        self.submitted = 0
        """Jobs handed to the pool (videos already cached are skipped, not counted)."""
        self.failed: dict[str, str] = {}
        """Videos whose warm-up decode failed, with why (the pipeline says it again)."""
        self._slots = threading.BoundedSemaphore(max(1, workers))
        self._lock = threading.RLock()  # cancel() runs done-callbacks that take it
        self._stopped = False
        self._futures: set[Future[Outcome]] = set()
        self._thread = threading.Thread(target=self._feed, name="evalkit-warmup", daemon=True)

    def start(self) -> CacheWarmup:
        """Begin feeding the pool (returns at once)."""
        if self.jobs:
            self._thread.start()
        return self

    def stop(self) -> None:
        """Submit nothing more; cancel what the pool has not started; running decodes
        finish on their own (nobody waits for them here)."""
        with self._lock:
            self._stopped = True
            for fut in list(self._futures):
                fut.cancel()
        with contextlib.suppress(ValueError):  # wake a feeder waiting for a slot
            self._slots.release()

    def _feed(self) -> None:
        args = cache_args(self.cache)
        for ref, spec in self.jobs:
            self._slots.acquire()
            try:
                # one stat and a hash: a video cached before the run costs no process
                skip = self.cache.path_for(ref, spec).exists()
            except Exception:  # a missing or unreadable file: the pipeline reports it
                skip = True
            with self._lock:
                if self._stopped:
                    return
                if skip:
                    self._slots.release()
                    continue
                try:
                    fut = self.pool.submit(
                        build_one, args, ref.model_dump_json(), spec.model_dump_json()
                    )
                except RuntimeError:  # the pool is shutting down: the run is ending
                    return
                self.submitted += 1
                self._futures.add(fut)
            fut.add_done_callback(functools.partial(self._done, ref=ref))

    def _done(self, fut: Future[Outcome], *, ref: VideoRef) -> None:
        with self._lock:
            self._futures.discard(fut)
        if not fut.cancelled():
            exc = fut.exception()
            status, _, why = fut.result() if exc is None else ("failed", 0, repr(exc))
            if status == "failed":
                self.failed[ref.path] = why
        with contextlib.suppress(ValueError):  # stop() may have released this slot already
            self._slots.release()


@contextlib.contextmanager
def warming(cache: FrameCache, jobs: Sequence[Job], workers: int) -> Iterator[CacheWarmup]:
    """A started :class:`CacheWarmup` on decoding processes of its own, stopped when the
    block ends (the engine is up, or its start failed): ``workers`` at most, fewer where
    the engine's start needs the cores, at a lower CPU priority (``beside_engine``).
    Decodes under way then finish in the background (nobody waits for them; the pipeline
    waits on such an entry's lock, then hits) and the processes end."""
    from evalkit.cache.build import beside_engine, decoding_pool

    procs = beside_engine(workers)
    pool = decoding_pool(procs.workers, procs.threads, procs.nice)  # starts on the first job
    warmup = CacheWarmup(cache, jobs, pool, procs.workers).start()
    try:
        yield warmup
    finally:
        warmup.stop()
        pool.shutdown(wait=False, cancel_futures=True)
        if warmup.submitted:
            log.info(
                "frame cache: %d of %d videos sent to decode while the engine started (%d failed)",
                warmup.submitted,
                len(jobs),
                len(warmup.failed),
            )
