"""The parts every process of a run builds alike from its plan: the engine, the frame
cache, the miss pool, the judge, a benchmark's request builder and scorer (the in-process
runner and each replica of a replicated run)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.engines import build
from evalkit.engines.base import Engine
from evalkit.engines.lifecycle import close_engine
from evalkit.errors import EngineStartError, EvalkitError
from evalkit.prompts import PromptPlan
from evalkit.request_builder import RequestBuilder
from evalkit.run.config import RunConfig, judge_engine_options
from evalkit.run.plan import BenchRun, RunPlan
from evalkit.scoring.bounded import BoundedScorer, ScoringPool
from evalkit.scoring.context import ScoringContext
from evalkit.scoring.run_scorer import RunScorer
from evalkit.video.budget import FrameLog

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec
    from evalkit.cache import FrameCache
    from evalkit.scoring import LLMJudge


def make_cache(cfg: RunConfig) -> FrameCache:
    """The run's frame cache under the configured identity and codec."""
    from evalkit.cache import FrameCache

    return FrameCache(
        cfg.cache_root,
        identity=cfg.cache_identity,
        codec=cfg.cache_codec,
        jpeg_quality=cfg.cache_jpeg_quality,
    )


def make_builder(
    cfg: RunConfig,
    bench: BenchRun,
    cache: FrameCache,
    engine: Engine,
    pool: ProcessPoolExecutor | None,
    frame_log: FrameLog,
) -> RequestBuilder:
    """The request builder of one benchmark (frames from ``cache``, misses on ``pool``)."""
    return RequestBuilder(
        cache=cache,
        frame_spec=bench.frame_spec,
        image_spec=bench.spec.images,
        prompt=bench.prompt,
        sampling=bench.sampling,
        require_cache=cfg.require_cache,
        miss_pool=pool,
        max_prompt_tokens=getattr(engine, "max_model_len", None)
        if bench.check_prompt_tokens
        else None,
        frame_log=frame_log,
        media_gate=bench.media_gate,
    )


def _judge_template(spec: BenchmarkSpec | None) -> str:
    judge = getattr(spec, "judge", None)
    name = judge.prompt if judge is not None else "judge"
    return name if name.endswith(".jinja") else f"{name}.jinja"


def make_engine(plan: RunPlan) -> Engine:
    """Build the plan's backend (heavy imports happen here, not at import time); under
    ``--mode sync`` the plan names the batch variant (vLLM's LLM.generate on batches, the
    way other harnesses run it). A backend that fails to start is an EngineStartError
    with its words in one line (its cause, with the traceback, chained)."""
    try:
        return build_sized(plan.engine, model_here(plan), plan.engine_options)
    except EvalkitError:
        raise
    except Exception as exc:
        said = " ".join(str(exc).split()) or "(no message)"
        raise EngineStartError(
            f"the {plan.engine} engine did not start for --model {plan.config.model}: "
            f"{type(exc).__name__}: {said}"
        ) from exc


def build_sized(
    engine: str, model: str, options: dict[str, Any], opt_flag: str = "--engine-opt"
) -> Engine:
    """Build backend ``engine``, first sized to this machine's free memory where it reserves
    a share of the RAM (vLLM on a CPU: ``evalkit.engines.cpu_memory.fit``; one line of
    ConfigError, before it starts, when it cannot fit)."""
    from evalkit.engines import engine_config, engine_spec

    if engine_spec(engine).reserves_memory:
        from evalkit.engines.cpu_memory import checkpoint_bytes, fit, reserves_cpu_memory

        if reserves_cpu_memory(engine):
            dtype = str(getattr(engine_config(engine, model, options), "dtype", "auto"))
            options = fit(options, checkpoint_bytes(model, dtype), opt_flag=opt_flag)
    return build(engine, model, options)


def model_here(plan: RunPlan) -> str:
    """The model's folder on this machine: a model from the Hub is fetched here too when
    this node of a cluster does not have the commit the plan was made with."""
    model = plan.model
    if model.revision is None or Path(model.path).is_dir():
        return model.path
    from evalkit.hub.models import hub_id, model_from_hub

    parsed = hub_id(plan.config.model)
    assert parsed is not None  # a revision is recorded only for hub ids
    return str(model_from_hub(f"{parsed[0]}@{model.revision}", fetch=plan.config.fetch).path)


def data_here(plan: RunPlan) -> None:
    """Every release the plan read from the Hub, on this machine too: a node of a cluster
    that lacks one fetches it (the media of the samples run; one fetch per node, the
    others wait on its lock, and none where ``EVALKIT_DATA`` is a folder they share)."""
    from evalkit.bench.media import media_paths
    from evalkit.hub import Need, release_root

    for bench in plan.benches:
        data = bench.data
        if data is None or data.commit is None:
            continue
        if all(Path(p).exists() for s in bench.samples for p in media_paths(s)):
            continue
        need = Need(limit=plan.config.limit)
        here = release_root(bench.spec, need, fetch=plan.config.fetch)
        if here != Path(data.root):
            raise EvalkitError(
                f"{bench.name}: this node keeps its releases in {here.parent.parent}, the "
                f"driver in {Path(data.root).parent.parent}: give every node the same "
                "EVALKIT_DATA (a shared folder fetches once for all)"
            )


@contextlib.asynccontextmanager
async def judge_for(
    cfg: RunConfig, engine: Engine | None, cache_dir: Path
) -> AsyncIterator[LLMJudge | None]:
    """The run's LLM judge (or None), released afterwards; each benchmark's scorer gets it
    with that benchmark's judge prompt (``make_scorer``), nothing process-wide is set."""
    from evalkit.scoring import LLMJudge
    from evalkit.scoring.judge_guard import JudgeGuard

    if cfg.judge is None:
        yield None
        return
    jc = cfg.judge
    own = engine is None
    engine = engine or build_sized(jc.engine, jc.model, judge_engine_options(jc), "--judge-opt")
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


def make_scorer(
    spec: BenchmarkSpec | None = None,
    judge: LLMJudge | None = None,
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
class SharedParts:
    """The processes that runs side by side on one loop share (a sweep's settings), which
    would otherwise multiply with the runs: the cache-miss decoders and the scoring
    children (one of each set per setting made 197 processes for 200 settings)."""

    decoders: ProcessPoolExecutor
    scoring: ScoringPool | None
    """None where scoring runs on the sink thread (no budget, or no fork)."""


@contextlib.contextmanager
def shared_parts(cfg: RunConfig, scoring_processes: int) -> Iterator[SharedParts]:
    """One miss pool and one pool of at most ``scoring_processes`` scoring children for
    the runs of ``cfg``'s settings, ended when the block ends."""
    budget = cfg.pipeline.score_budget_s
    bounded = budget > 0 and BoundedScorer.available()
    scoring = ScoringPool(scoring_processes, budget) if bounded else None
    with miss_pool(cfg.cache_workers) as decoders:
        try:
            yield SharedParts(decoders, scoring)
        finally:
            if scoring is not None:
                scoring.close()
