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
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.cache.key import fingerprint_settings
from evalkit.config import throughput_only_fields
from evalkit.engines import build, engine_for_mode, reads_local_checkpoint
from evalkit.engines.base import Engine
from evalkit.engines.lifecycle import close_engine, in_daemon_thread
from evalkit.errors import ConfigError
from evalkit.generation import describe as describe_sampling
from evalkit.generation import sampling_for
from evalkit.manifest import RunManifest, hash_json
from evalkit.pipeline import Pipeline, PipelineStats
from evalkit.prompts import PromptPlan
from evalkit.runconfig import JudgeConfig, RunConfig
from evalkit.rundir import RunDir, hash_path, new_run_id
from evalkit.runparts import BenchRun, make_builder, make_cache
from evalkit.sample import Sample, VideoRef
from evalkit.scoring.context import ScoringContext
from evalkit.scoring.run_scorer import RunScorer
from evalkit.video.budget import FrameLog
from evalkit.video.types import FrameSpec


def resolve_benchmarks(
    cfg: RunConfig, factor: int | None, *, check_media: bool = True
) -> list[BenchRun]:
    """Load every requested benchmark's spec and samples. ``check_media=False`` keeps the
    rows whose media are missing (a run's preflight then names them all at once, or
    records them failed under ``--allow-missing``) instead of leaving them out as invalid."""
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark

    runs: list[BenchRun] = []
    for name in cfg.bench:
        spec = get_benchmark(name)  # NAME:VARIANT; an unknown variant is a RegistryError
        root = _bench_root(cfg, spec)
        loaded = load(spec, root, check_media=check_media)
        runs.append(bench_run(cfg, spec, loaded, factor, problems=loaded.problems))
        runs[-1].media_root = str(root)
    if cfg.data:
        runs += data_bench_runs(cfg, factor)
    if not runs:
        raise ConfigError("nothing to run: give --bench NAME[,NAME...] and/or --data FILE")
    return runs


def data_bench_runs(cfg: RunConfig, factor: int | None) -> list[BenchRun]:
    """The benchmarks of ``cfg.data``: one per known source named by the rows (under its
    official spec and rule), the rest pooled. ``evalkit run --data`` and ``evalkit score
    --data`` both read a file through here, so a file means the same to both."""
    from evalkit.bench.unified_known import data_benches

    assert cfg.data is not None
    runs = []
    for db in data_benches(cfg.data, cfg.video_root):
        run = bench_run(cfg, db.spec, db.samples, factor, problems=db.problems)
        run.name, run.data_info = db.name, db.info(Path(cfg.data))
        run.media_root = str(Path(cfg.video_root or Path(cfg.data).parent))
        runs.append(run)
    return runs


def bench_run(
    cfg: RunConfig,
    spec: Any,
    samples: list[Sample],
    factor: int | None,
    problems: list[Any] | None = None,
) -> BenchRun:
    """One benchmark as ``cfg`` runs it: frames, prompt plan, sampling, samples."""
    prompt = PromptPlan.for_spec(spec, cfg.variant)
    thinking = prompt.thinking(spec.task_types)
    return BenchRun(
        name=spec.name,
        spec=spec,
        frame_spec=_frame_spec(cfg, spec.frames, factor),
        sampling=sampling_for(spec.generation, thinking, cfg.max_tokens),
        samples=samples[: cfg.limit] if cfg.limit else list(samples),
        prompt=prompt,
        problems=list(problems or []),
        available=len(samples),
    )


def _bench_root(cfg: RunConfig, spec: Any) -> Path:
    candidates = []
    if cfg.data_root:
        candidates += [Path(cfg.data_root) / spec.name, Path(cfg.data_root) / spec.key]
        if len(cfg.bench) == 1:
            candidates.append(Path(cfg.data_root))
    if spec.data.local_path:
        candidates.append(Path(spec.data.local_path).expanduser())
    for cand in candidates:
        if cand.is_dir():
            return cand
    tried = ", ".join(str(c) for c in candidates) or "nothing (no --data-root given)"
    raise ConfigError(
        f"{spec.name}: no local copy found (tried {tried}); download the official release "
        f"and pass --data-root DIR holding a '{spec.name}' folder (`evalkit bench show "
        f"{spec.name}` prints the expected layout)"
    )


def _frame_spec(cfg: RunConfig, pinned: FrameSpec, factor: int | None) -> FrameSpec:
    spec = cfg.frames.apply(pinned)
    if factor is not None and spec.factor != factor:
        # the model decides the patch grid
        spec = FrameSpec.model_validate({**spec.model_dump(), "factor": factor})
    return spec


def _judge_template(spec: Any) -> str:
    judge = getattr(spec, "judge", None)
    name = judge.prompt if judge is not None else "judge"
    return name if name.endswith(".jinja") else f"{name}.jinja"


def make_engine(cfg: RunConfig) -> Engine:
    """Build the configured backend (heavy imports happen here, not at import time)."""
    # the vanilla baseline runs vLLM the way other harnesses do: LLM.generate on batches
    return build(engine_for_mode(cfg.engine, cfg.mode), cfg.model, cfg.engine_options)


@contextlib.asynccontextmanager
async def judge_for(cfg: RunConfig, engine: Engine | None, cache_dir: Path) -> AsyncIterator[Any]:
    """The run's LLM judge (or None), released afterwards; each benchmark's scorer gets it
    with that benchmark's judge prompt (``make_scorer``), nothing process-wide is set."""
    from evalkit.scoring import LLMJudge
    from evalkit.scoring.judge_guard import JudgeGuard

    if cfg.judge is None:
        yield None
        return
    jc = cfg.judge
    own = engine is None
    engine = engine or build(jc.engine, jc.model, _judge_engine_options(jc))
    judge = LLMJudge(
        engine=engine,
        model=jc.model,
        cache_dir=cache_dir,
        graded=jc.graded,
        loop=asyncio.get_running_loop(),  # judged samples are awaited on this loop
        guard=JudgeGuard(jc.timeout_s, jc.retries, jc.concurrency, jc.max_failures),
    )
    try:
        yield judge
    finally:
        if own:
            await close_engine(engine)


def _judge_engine_options(jc: JudgeConfig) -> dict[str, Any]:
    """The judge engine's options with its client timeout set from the judge's, and its
    own retries off (the judge retries), where its config has such fields."""
    from evalkit.engines import ENGINE_CONFIGS

    fields = ENGINE_CONFIGS.get(jc.engine).model_fields
    client = {"timeout_s": jc.timeout_s, "max_retries": 0}
    return {**{k: v for k, v in client.items() if k in fields}, **jc.engine_options}


def model_factor(cfg: RunConfig) -> int | None:
    """The resize factor of the model's family, when the model is a local checkpoint."""
    if not Path(cfg.model).is_dir():
        return None
    from evalkit.engines.family import detect_family

    return detect_family(cfg.model).factor


def result_config(cfg: RunConfig, benches: list[BenchRun]) -> dict[str, Any]:
    """The part of the configuration that can change a result (the run's fingerprint)."""
    return {
        "model": cfg.model,
        "model_hash": hash_path(cfg.model),
        "engine": cfg.engine,
        "engine_options": _result_engine_options(cfg.engine, cfg.engine_options),
        "variant": cfg.variant,
        "judge": _result_judge(cfg.judge),
        **({"rule": cfg.rule} if cfg.rule else {}),  # unset: the specs' rules (as before)
        **fingerprint_settings(cfg.cache_identity, cfg.cache_codec, cfg.cache_jpeg_quality),
        "benchmarks": {
            b.name: {
                "spec_hash": hash_json(b.spec.model_dump(mode="json")),
                "frames": b.frame_spec.model_dump(mode="json"),
                **b.prompt.describe(b.spec.task_types),
                **describe_sampling(b.sampling),
            }
            for b in benches
        },
    }


def _result_engine_options(engine: str, options: dict[str, Any]) -> dict[str, Any]:
    # knobs that change scheduling, memory or calling but never the greedy output are
    # marked in the engine's config model (evalkit.config.throughput_only)
    from evalkit.engines import ENGINE_CONFIGS

    # (an unregistered engine, evalkit score's "external" predictions, has no such knobs)
    known = engine in ENGINE_CONFIGS
    skip = throughput_only_fields(ENGINE_CONFIGS.get(engine)) if known else frozenset()
    return {k: v for k, v in sorted(options.items()) if k not in skip}


def _result_judge(jc: JudgeConfig | None) -> dict[str, Any] | None:
    # how the judge is called (not what it answers) is marked throughput-only too
    if jc is None:
        return None
    return jc.model_dump(mode="json", exclude=set(throughput_only_fields(JudgeConfig)))


def make_scorer(
    spec: Any = None,
    judge: Any = None,
    prompt: PromptPlan | None = None,
    rule: str | None = None,
) -> RunScorer:
    """The pipeline's scorer for a benchmark (``RunScorer``), judging with ``judge`` asking
    the benchmark's judge prompt; where ``prompt`` pre-filled the assistant's turn, samples
    are scored with that prefix. ``rule`` overrides the spec's headline choice
    (``BenchmarkSpec.headline_rule``: ``official+judge``, ``evalkit``)."""
    # each benchmark may prescribe its judge prompt: a judge of its own, the run's unchanged
    own = judge.with_template(_judge_template(spec)) if judge is not None else None
    return RunScorer(spec, ScoringContext(own), prompt, rule)


@contextlib.contextmanager
def miss_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """Worker processes that decode cache misses during a run."""
    from evalkit.cache.build import decoding_pool

    pool = decoding_pool(workers)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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


def run_manifest(cfg: RunConfig, benches: list[BenchRun]) -> RunManifest:
    """The run's manifest: result config (the fingerprint), settings, specs as run."""
    extra = cfg.model_dump(mode="json", exclude={"resume", "force", "retry_failed"})
    return RunManifest.build(
        result_config(cfg, benches),
        extra,
        # the specs as run, so reports aggregate by the rules in force (ad-hoc sets included)
        specs={b.name: b.spec for b in benches},
        data_benchmarks={b.name: b.data_info for b in benches if b.data_info},
        benchmark_samples={b.name: b.available for b in benches if b.available is not None},
    )


def open_run(cfg: RunConfig, rundir: RunDir, benches: list[BenchRun]) -> str:
    """Record (or check) the run's manifest and its invalid rows; the fingerprint."""
    fingerprint = rundir.open(run_manifest(cfg, benches), force=cfg.force)
    for b in benches:  # invalid rows, for the report (invalid/<benchmark>.jsonl)
        rundir.write_problems(b.name, b.problems)
    return fingerprint


async def aexecute(
    cfg: RunConfig,
    engine: Engine | None = None,
    on_start: Callable[[str, Pipeline], None] | None = None,
    judge_engine: Engine | None = None,
    on_open: Callable[[Path], None] | None = None,
) -> RunResult:
    """:func:`execute` inside a running event loop (one loop for the engine's whole life)."""
    from evalkit.preflight import check_run

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
    from evalkit.preflight import media_preflight, record_missing
    from evalkit.resume import pending

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
    on ``pool`` (``evalkit.warmup``; not in ``--mode sync``). Its start time is recorded."""
    from evalkit.startup import StartupTimes
    from evalkit.warmup import pending_videos, warming, warms_up

    jobs = []
    if warms_up(cfg):
        jobs = pending_videos(rundir, benches, retry_failed=cfg.retry_failed)
    t0 = time.perf_counter()
    with warming(cache, jobs, pool, cfg.cache_workers):
        engine = await in_daemon_thread(make_engine, cfg)
    StartupTimes(engines_s=time.perf_counter() - t0).write(rundir)
    return engine


def refs_of(samples: list[Sample]) -> list[VideoRef]:
    """Every video a list of samples needs (for building the cache ahead of a run)."""
    return [m for s in samples for m in s.media if isinstance(m, VideoRef)]
