"""``evalkit run`` as a library call: benchmarks -> samples -> pipeline -> run directory.

The run is an orchestration of the pieces, nothing more: the benchmark registry gives
specs and samples, the frame cache gives frames, the engine generates, the scorers
score, the store keeps every finished sample. Settings that change results are frozen
in the run directory, so a resumed run cannot silently mix configurations.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.engines.base import Engine
from evalkit.engines.lifecycle import close_engine, in_daemon_thread
from evalkit.errors import ConfigError
from evalkit.pipeline import Pipeline, PipelineStats
from evalkit.run.components import (
    SharedParts,
    judge_for,
    make_builder,
    make_cache,
    make_engine,
    make_scorer,
    miss_pool,
)
from evalkit.run.config import RunConfig
from evalkit.run.open import OpenRun, open_run, run_path
from evalkit.run.plan import RunPlan, plan_run
from evalkit.rundir import RunDir
from evalkit.video.budget import FrameLog

if TYPE_CHECKING:
    from evalkit.cache import FrameCache


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
    run: RunConfig | RunPlan,
    engine: Engine | None = None,
    on_start: Callable[[str, Pipeline], None] | None = None,
    judge_engine: Engine | None = None,
    on_open: Callable[[Path], None] | None = None,
    shared: SharedParts | None = None,
) -> RunResult:
    """:func:`execute` inside a running event loop (one loop for the engine's whole life).
    ``run`` may be a plan made already: a sweep plans (and checks) every setting before its
    one engine starts, then runs the plans side by side on it, ``shared`` giving them one
    set of decoding and scoring processes."""
    from evalkit.run.preflight import check_run, media_preflight

    if isinstance(run, RunConfig):
        check_run(run, engine_given=engine is not None)  # before any run directory exists
        # the archives of a release fetched from the Hub come while the engine starts
        run = plan_run(run, background=True)
    cfg = run.config
    missing = media_preflight(cfg, run.benches)  # before the run directory and the engine
    with open_run(run, run_path(cfg), missing=missing, on_open=on_open) as opened:
        return await _execute_open(opened, engine, on_start, judge_engine, shared)


async def _execute_open(
    run: OpenRun,
    engine: Engine | None,
    on_start: Callable[[str, Pipeline], None] | None,
    judge_engine: Engine | None,
    shared: SharedParts | None = None,
) -> RunResult:
    from evalkit.run.resume import pending

    plan, rundir, cfg = run.plan, run.dir, run.plan.config
    unseen = run.media_missing
    # the stores are checked (a damaged one is reported) before any engine starts
    failed_done = cfg.mode == "sync" or not cfg.retry_failed
    if not any(pending(rundir, plan.benches, include_failed=failed_done).values()):
        n = {b.name: len(b.samples) for b in plan.benches}
        done = {name: PipelineStats(total=k, skipped=k) for name, k in n.items()}
        for name, k in unseen.items():
            done[name].media_missing = k
        return RunResult(path=run.path, stats=done, nothing_to_run=not any(unseen.values()))
    if cfg.resume and engine is None:
        from evalkit.run.preflight import probe_served

        probe_served(cfg)  # a new run was probed before its directory was made
    cache = make_cache(cfg)
    own_engine = engine is None
    stats: dict[str, PipelineStats] = {}
    decoders = contextlib.nullcontext(shared.decoders) if shared else miss_pool(cfg.cache_workers)
    with decoders as pool:
        if engine is None:
            engine = await _start_engine(plan, rundir, cache)
        try:
            async with judge_for(cfg, judge_engine, rundir.judge_cache_path) as judge:
                for bench in plan.benches:
                    frames_seen = FrameLog()
                    builder = make_builder(cfg, bench, cache, engine, pool, frames_seen)
                    pipe = Pipeline(
                        engine,
                        builder,
                        make_scorer(bench.spec, judge, bench.prompt, cfg.rule),
                        run.store(bench.name),
                        cfg.pipeline,
                        run.fingerprint,
                        scoring=shared.scoring if shared else None,
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
    return RunResult(path=run.path, stats=stats)


async def _start_engine(plan: RunPlan, rundir: RunDir, cache: FrameCache) -> Engine:
    """The run's engine, started on a daemon thread (the loop stays free to take SIGTERM
    during vLLM's start-up) while the pending samples' frames are decoded into the cache
    (``evalkit.run.warmup``, at a lower CPU priority; not in ``--mode sync``). Its start time
    is recorded."""
    from evalkit.run.warmup import warming, warmup_jobs
    from evalkit.startup import StartupTimes

    cfg = plan.config
    jobs = warmup_jobs([(plan, rundir)])
    t0 = time.perf_counter()
    with warming(cache, jobs, cfg.cache_workers):
        engine = await in_daemon_thread(make_engine, plan)
    StartupTimes(engines_s=time.perf_counter() - t0).write(rundir)
    return engine
