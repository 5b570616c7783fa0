"""What a run runs, resolved once from its RunConfig (:func:`plan_run` -> :class:`RunPlan`):
each benchmark as run (``BenchRun``: spec, samples, frame spec, sampling, prompt plan), the
engine it is built on, and the result configuration whose hash is the run's fingerprint
(its ``RunManifest``). The in-process runner, the Ray driver and every replica run the
same plan; nothing below it resolves a benchmark or reads a config again."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.cache.key import fingerprint_settings
from evalkit.config import throughput_only_fields
from evalkit.engines import engine_for_mode, reads_local_checkpoint
from evalkit.engines.base import SamplingParams
from evalkit.engines.family import ModelFamily, run_family
from evalkit.errors import ConfigError, EvalkitError, Problem
from evalkit.generation import describe as describe_sampling
from evalkit.generation import sampling_for
from evalkit.manifest import BenchmarkSettings, ResultConfig, RunManifest, hash_json
from evalkit.prompts import PromptPlan
from evalkit.run.config import JudgeConfig, RunConfig
from evalkit.rundir import hash_path
from evalkit.sample import Sample, VideoRef
from evalkit.video.types import FrameSpec

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec


@dataclass
class BenchRun:
    """One benchmark of a run: its name, frame spec, sampling and samples."""

    name: str
    spec: BenchmarkSpec
    """Its spec as run (an ad-hoc ``--data`` file gets a generated one)."""
    frame_spec: FrameSpec
    sampling: SamplingParams
    samples: list[Sample]
    prompt: PromptPlan = field(default_factory=PromptPlan)
    problems: list[Problem] = field(default_factory=list)
    """Rows that did not load (or loaded repaired)."""
    data_info: dict[str, Any] | None = None
    """For a benchmark made from a ``--data`` file: how its rows were matched/aggregated."""
    available: int | None = None
    """Samples the benchmark's data gave before ``--limit`` (recorded: a run of fewer is a
    slice, which ``evalkit repro`` says)."""
    media_root: str | None = None
    """The folder its media paths were resolved under (named when media are missing)."""
    frames_from: dict[str, str] = field(default_factory=dict)
    """Which source gave its frame settings (``frames``/``pixels``: benchmark, family,
    model or flags); empty when the model's family is not known (a served model)."""


@dataclass
class RunPlan:
    """A run resolved once from its :class:`RunConfig`: what every process of the run
    needs, and nothing it would have to look up again. It pickles (the Ray driver sends
    it to the replicas as is)."""

    config: RunConfig
    """The settings it was planned from (the manifest's ``extra`` is their dump)."""
    benches: list[BenchRun]
    """Each benchmark as run, in the order given."""
    engine: str
    """The backend built for it (``--mode sync``: the batch variant, see ``engine_for_mode``)."""
    engine_options: dict[str, Any]
    """The backend's settings, as given."""
    manifest: RunManifest
    """What the run directory records (``config.json``): the result config and fingerprint."""
    id: str = ""
    """Which plan of a process this is (records and batches name it); the fingerprint
    unless the caller names it (several plans may then share one engine)."""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = self.fingerprint

    @property
    def fingerprint(self) -> str:
        """The hash stamped on every record of the plan (``ResultConfig.fingerprint``)."""
        return self.manifest.fingerprint

    def bench(self, name: str) -> BenchRun:
        """The benchmark ``name`` of the plan (KeyError naming it and the plan's ones)."""
        for b in self.benches:
            if b.name == name:
                return b
        raise KeyError(f"{name}: not a benchmark of run plan {self.id} ({self.names()})")

    def names(self) -> list[str]:
        """The benchmarks' names in the run."""
        return [b.name for b in self.benches]


def plan_run(cfg: RunConfig, *, check_media: bool = False) -> RunPlan:
    """Resolve ``cfg`` once: the benchmarks (specs, samples, invalid rows, media roots),
    each one's frame spec (the model's resize factor applied), sampling and prompt plan,
    the engine, and the manifest with the fingerprint. Rows whose media are missing are
    kept (``check_media=False``): the run's preflight names them all at once, or records
    them failed under ``--allow-missing``."""
    family = model_family(cfg)
    return plan_of(cfg, resolve_benchmarks(cfg, family, check_media=check_media), family)


def plan_of(cfg: RunConfig, benches: list[BenchRun], family: ModelFamily | None = None) -> RunPlan:
    """The plan of ``cfg`` running ``benches`` (resolved by :func:`plan_run`, or made by
    hand by a caller that brings its own samples: ``evalkit.testing.runs``)."""
    return RunPlan(
        config=cfg,
        benches=benches,
        engine=engine_for_mode(cfg.engine, cfg.mode),
        engine_options=dict(cfg.engine_options),
        manifest=run_manifest(cfg, benches, family),
    )


def resolve_benchmarks(
    cfg: RunConfig, family: ModelFamily | None, *, check_media: bool = True
) -> list[BenchRun]:
    """Load every requested benchmark's spec and samples. ``check_media=False`` keeps the
    rows whose media are missing (a run's preflight then names them all at once, or
    records them failed under ``--allow-missing``) instead of leaving them out as invalid."""
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark

    runs: list[BenchRun] = []
    for name in cfg.bench:
        spec = get_benchmark(name)  # NAME:VARIANT; an unknown variant is a RegistryError
        root = bench_root(cfg, spec)
        loaded = load(spec, root, check_media=check_media)
        runs.append(bench_run(cfg, spec, loaded, family, problems=loaded.problems))
        runs[-1].media_root = str(root)
    if cfg.data:
        runs += data_bench_runs(cfg, family)
    if not runs:
        raise ConfigError("nothing to run: give --bench NAME[,NAME...] and/or --data FILE")
    return runs


def data_bench_runs(cfg: RunConfig, family: ModelFamily | None) -> list[BenchRun]:
    """The benchmarks of ``cfg.data``: one per known source named by the rows (under its
    official spec and rule), the rest pooled. ``evalkit run --data`` and ``evalkit score
    --data`` both read a file through here, so a file means the same to both."""
    from evalkit.bench.unified_known import data_benches

    assert cfg.data is not None
    runs = []
    for db in data_benches(cfg.data, cfg.video_root):
        run = bench_run(cfg, db.spec, db.samples, family, problems=db.problems)
        run.name, run.data_info = db.name, db.info(Path(cfg.data))
        run.media_root = str(Path(cfg.video_root or Path(cfg.data).parent))
        runs.append(run)
    return runs


def bench_run(
    cfg: RunConfig,
    spec: BenchmarkSpec,
    samples: list[Sample],
    family: ModelFamily | None,
    problems: list[Problem] | None = None,
) -> BenchRun:
    """One benchmark as ``cfg`` runs it: frames, prompt plan, sampling, samples."""
    prompt = PromptPlan.for_spec(spec, cfg.variant)
    thinking = prompt.thinking(spec.task_types)
    frame_spec, frames_from = frame_settings(cfg, spec.frames, family)
    return BenchRun(
        name=spec.name,
        spec=spec,
        frame_spec=frame_spec,
        frames_from=frames_from,
        sampling=sampling_for(spec.generation, thinking, cfg.max_tokens),
        samples=samples[: cfg.limit] if cfg.limit else list(samples),
        prompt=prompt,
        problems=list(problems or []),
        available=len(samples),
    )


def bench_root(cfg: RunConfig, spec: BenchmarkSpec) -> Path:
    """The folder holding ``spec``'s local copy (under ``--data-root`` or the spec's own
    ``data.local_path``); ConfigError naming every folder tried."""
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


_FRAME_FLAGS = {
    "frames": {"fps", "nframes", "max_frames"},
    "pixels": {"min_pixels", "max_pixels", "total_pixels"},
}


def frame_settings(
    cfg: RunConfig, pinned: FrameSpec, family: ModelFamily | None
) -> tuple[FrameSpec, dict[str, str]]:
    """The frames a benchmark pinned as ``pinned`` runs under: the family's reference where
    the spec leaves them to the model (``ModelFamily.frame_spec``), the run's --frames-*
    flags over both, the model's grid always; and which source gave them."""
    if family is None:  # a served model of unknown family: the spec and the flags, as given
        return cfg.frames.apply(pinned), {}
    flagged = {k for k, v in cfg.frames.model_dump().items() if v is not None}
    try:
        family.refuse_flags(flagged)
    except EvalkitError as exc:
        raise ConfigError(str(exc)) from None
    spec, origin = family.frame_spec(pinned)
    spec = family.on_grid(cfg.frames.apply(spec))
    for group, names in _FRAME_FLAGS.items():
        if flagged & names:
            origin[group] = "flags"
    return spec, origin


def model_family(cfg: RunConfig) -> ModelFamily | None:
    """The family of the run's model: its checkpoint's, or the served model's as the
    openai engine's ``family`` option names it; None when it cannot be known."""
    named = cfg.engine_options.get("family")
    return run_family(cfg.model, reads_local_checkpoint(cfg.engine), named)


def result_config(cfg: RunConfig, benches: list[BenchRun]) -> ResultConfig:
    """The part of the configuration that can change a result (the run's fingerprint).
    Only the keys set here are hashed (``ResultConfig.dump``): ``rule`` and
    ``frame_cache`` are left unset at their defaults, as runs made before them hashed."""
    optional: dict[str, Any] = {"rule": cfg.rule} if cfg.rule else {}
    optional.update(
        fingerprint_settings(cfg.cache_identity, cfg.cache_codec, cfg.cache_jpeg_quality)
    )
    return ResultConfig(
        model=cfg.model,
        model_hash=hash_path(cfg.model),
        engine=cfg.engine,
        engine_options=_result_engine_options(cfg.engine, cfg.engine_options),
        variant=cfg.variant,
        judge=_result_judge(cfg.judge),
        benchmarks={
            b.name: BenchmarkSettings(
                spec_hash=hash_json(b.spec.model_dump(mode="json")),
                frames=b.frame_spec.model_dump(mode="json"),
                **b.prompt.describe(b.spec.task_types),
                **describe_sampling(b.sampling),
            )
            for b in benches
        },
        **optional,
    )


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


def run_manifest(
    cfg: RunConfig, benches: list[BenchRun], family: ModelFamily | None = None
) -> RunManifest:
    """The run's manifest: result config (the fingerprint), settings, specs as run, and the
    model's family with the source of each benchmark's frame settings."""
    extra = cfg.model_dump(mode="json", exclude={"resume", "force", "retry_failed"})
    recorded = None
    if family is not None:
        recorded = {**family.describe(), "frames_from": {b.name: b.frames_from for b in benches}}
    return RunManifest.build(
        result_config(cfg, benches),
        extra,
        # the specs as run, so reports aggregate by the rules in force (ad-hoc sets included)
        specs={b.name: b.spec for b in benches},
        data_benchmarks={b.name: b.data_info for b in benches if b.data_info},
        benchmark_samples={b.name: b.available for b in benches if b.available is not None},
        family=recorded,
    )


def refs_of(samples: list[Sample]) -> list[VideoRef]:
    """Every video a list of samples needs (for building the cache ahead of a run)."""
    return [m for s in samples for m in s.media if isinstance(m, VideoRef)]
