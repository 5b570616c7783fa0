"""``evalkit run`` as a library call: benchmarks -> samples -> pipeline -> run directory.

The run is an orchestration of the pieces, nothing more: the benchmark registry gives
specs and samples, the frame cache gives frames, the engine generates, the scorers
score, the store keeps every finished sample. Settings that change results are frozen
in the run directory, so a resumed run cannot silently mix configurations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.engines import reads_local_checkpoint
from evalkit.engines.base import Engine
from evalkit.engines.lifecycle import close_engine, in_daemon_thread
from evalkit.errors import ConfigError
from evalkit.pipeline import Pipeline, PipelineStats
from evalkit.run.components import (
    judge_for,
    make_builder,
    make_cache,
    make_engine,
    make_scorer,
    miss_pool,
)
from evalkit.run.config import RunConfig
from evalkit.run.open import open_run
from evalkit.run.plan import BenchRun, model_factor, resolve_benchmarks
from evalkit.rundir import RunDir, new_run_id
from evalkit.video.budget import FrameLog


@dataclass
class RunResult:
    """Where the run lives and what happened per benchmark."""

    path: Path
    stats: dict[str, PipelineStats]
    nothing_to_run: bool = False
    """Every sample was already recorded: no engine was started."""


def execute(
    cfg: RunConfig,
    engine: Engine | None = None,
    on_start: Callable[[str, Pipeline], None] | None = None,
    judge_engine: Engine | None = None,
    on_open: Callable[[Path], None] | None = None,
) -> RunResult:
    """Run every benchmark of ``cfg`` through one engine into one run directory (a run on
    replicas, ``cfg.on_ray``, goes through ``evalkit.scale.driver.run_replicas``: the
    scale layer builds on this one, not the other way round). ``on_open(path)`` is called
    once the run directory exists, before any engine starts."""
    if cfg.on_ray:
        raise ConfigError(
            "replicas build their own engines and are driven by "
            "evalkit.scale.driver.run_replicas(cfg) (`evalkit run --replicas N`), not execute()"
        )
    return asyncio.run(aexecute(cfg, engine, on_start, judge_engine, on_open))


async def aexecute(
    cfg: RunConfig,
    engine: Engine | None = None,
    on_start: Callable[[str, Pipeline], None] | None = None,
    judge_engine: Engine | None = None,
    on_open: Callable[[Path], None] | None = None,
) -> RunResult:
    """:func:`execute` inside a running event loop (one loop for the engine's whole life)."""
    from evalkit.run.preflight import check_run

    check_run(cfg, engine_given=engine is not None)  # before any run directory exists
    path = Path(cfg.resume) if cfg.resume else Path(cfg.runs_dir) / (cfg.run_id or new_run_id())
    with RunDir(path).lock():  # before anything else: one writer per run directory
        return await _aexecute_locked(cfg, path, engine, on_start, judge_engine, on_open)


async def _aexecute_locked(
    cfg: RunConfig,
    path: Path,
    engine: Engine | None,
    on_start: Callable[[str, Pipeline], None] | None,
    judge_engine: Engine | None,
    on_open: Callable[[Path], None] | None = None,
) -> RunResult:
    from evalkit.run.preflight import media_preflight, record_missing
    from evalkit.run.resume import pending

    factor = model_factor(cfg) if reads_local_checkpoint(cfg.engine) else None
    benches = resolve_benchmarks(cfg, factor, check_media=False)
    missing = media_preflight(cfg, benches)  # before the run directory and the engine
    rundir = RunDir(path)
    fingerprint = open_run(cfg, rundir, benches)
    if on_open is not None:
        on_open(path)
    unseen = record_missing(rundir, benches, missing, fingerprint)
    # the stores are checked (a damaged one is reported) before any engine starts
    failed_done = cfg.mode == "sync" or not cfg.retry_failed
    if not any(pending(rundir, benches, include_failed=failed_done).values()):
        n = {b.name: len(b.samples) for b in benches}
        done = {name: PipelineStats(total=k, skipped=k) for name, k in n.items()}
        for name, k in unseen.items():
            done[name].media_missing = k
        return RunResult(path=path, stats=done, nothing_to_run=not any(unseen.values()))
    cache = make_cache(cfg)
    own_engine = engine is None
    stats: dict[str, PipelineStats] = {}
    # the pool exists before the engine: the frame cache warms on it while the engine starts
    with miss_pool(cfg.cache_workers) as pool:
        if engine is None:
            engine = await _start_engine(cfg, rundir, benches, cache, pool)
        try:
            async with judge_for(cfg, judge_engine, rundir.judge_cache_path) as judge:
                for bench in benches:
                    frames_seen = FrameLog()
                    builder = make_builder(cfg, bench, cache, engine, pool, frames_seen)
                    with rundir.store(bench.name) as store:
                        pipe = Pipeline(
                            engine,
                            builder,
                            make_scorer(bench.spec, judge, bench.prompt, cfg.rule),
                            store,
                            cfg.pipeline,
                            fingerprint,
                        )
                        if on_start:
                            on_start(bench.name, pipe)
                        if cfg.mode == "sync":
                            stats[bench.name] = await pipe.run_sync(bench.samples)
                        else:
                            stats[bench.name] = await pipe.run(
                                bench.samples, retry_failed=cfg.retry_failed
                            )
                    # for the summary and the report
                    frames_seen.write(rundir.frames_path, bench.name)
        finally:
            if own_engine:
                await close_engine(engine)
    for name, k in unseen.items():  # recorded failed by the preflight (--allow-missing)
        stats[name].media_missing = k
    return RunResult(path=path, stats=stats)


async def _start_engine(
    cfg: RunConfig,
    rundir: RunDir,
    benches: list[BenchRun],
    cache: Any,
    pool: ProcessPoolExecutor,
) -> Engine:
    """The run's engine, started on a daemon thread (the loop stays free to take SIGTERM
    during vLLM's start-up) while the pending samples' frames are decoded into the cache
    on ``pool`` (``evalkit.run.warmup``; not in ``--mode sync``). Its start time is recorded."""
    from evalkit.run.warmup import pending_videos, warming, warms_up
    from evalkit.startup import StartupTimes

    jobs = []
    if warms_up(cfg):
        jobs = pending_videos(rundir, benches, retry_failed=cfg.retry_failed)
    t0 = time.perf_counter()
    with warming(cache, jobs, pool, cfg.cache_workers):
        engine = await in_daemon_thread(make_engine, cfg)
    StartupTimes(engines_s=time.perf_counter() - t0).write(rundir)
    return engine
