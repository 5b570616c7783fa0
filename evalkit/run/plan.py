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
from evalkit.manifest import (
    BenchmarkSettings,
    DataProvenance,
    ResultConfig,
    RunManifest,
    hash_json,
)
from evalkit.prompts import PromptPlan
from evalkit.run.config import JudgeConfig, RunConfig
from evalkit.rundir import RunDir, hash_path
from evalkit.sample import Sample, VideoRef
from evalkit.video.types import FrameSpec

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec
    from evalkit.bench.unified_known import DataBench
    from evalkit.hub.background import Prefetch


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
    data: DataProvenance | None = None
    """Which data it read (the release and commit, a hash of its annotation files)."""
    media_gate: Prefetch | None = None
    """Archives of its release still being fetched while the run goes (its samples wait
    for theirs); None when every file is in place. Never set on a plan sent to replicas."""
    frames_from: dict[str, str] = field(default_factory=dict)
    """Which source gave its frame settings (``frames``/``pixels``: benchmark, family,
    model or flags); empty when the model's family is not known (a served model)."""
    check_prompt_tokens: bool = True
    """Refuse a sample whose frames cannot fit the model's context before decoding them
    (off where the family's processor, not the cache, sizes the frames:
    ``FamilySpec.tokens_from_frames``)."""


@dataclass(frozen=True)
class ModelSource:
    """The model as an engine loads it: ``--model`` itself (a folder, a served name), or
    the snapshot of a hub id (``org/name[@revision]``) fetched into the local cache."""

    path: str
    """What the engine is built from."""
    revision: str | None = None
    """The commit of a model from the Hub (part of the run's identity); None otherwise."""


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
    model: ModelSource = field(default_factory=lambda: ModelSource(""))
    """Where the model's files are (a hub id's snapshot in the local cache)."""
    id: str = ""
    """Which plan of a process this is (records and batches name it); the fingerprint
    unless the caller names it (several plans may then share one engine)."""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = self.fingerprint
        if not self.model.path:
            self.model = ModelSource(self.config.model)

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


def plan_run(cfg: RunConfig, *, check_media: bool = False, background: bool = False) -> RunPlan:
    """Resolve ``cfg`` once: the benchmarks (specs, samples, invalid rows, media roots),
    each one's frame spec (the model's resize factor applied), sampling and prompt plan,
    the engine, and the manifest with the fingerprint. Rows whose media are missing are
    kept (``check_media=False``): the run's preflight names them all at once, or records
    them failed under ``--allow-missing``. ``background``: the archives of a release
    fetched from the Hub come while the run goes (``BenchRun.media_gate``)."""
    model = model_source(cfg)  # a hub id is fetched here, before any engine starts
    family = model_family(cfg, model.path)
    benches = resolve_benchmarks(cfg, family, check_media=check_media, background=background)
    return plan_of(cfg, benches, model, family)


def model_source(cfg: RunConfig) -> ModelSource:
    """Where ``cfg``'s model is: a hub id (``org/name[@revision]``) of an engine that loads
    checkpoints is fetched into the local Hugging Face cache (unless ``--no-fetch``); a
    folder, or a served model's name, is itself."""
    from evalkit.hub.models import hub_id, model_from_hub

    if not reads_local_checkpoint(cfg.engine) or hub_id(cfg.model) is None:
        return ModelSource(cfg.model)
    found = model_from_hub(cfg.model, fetch=cfg.fetch)
    return ModelSource(str(found.path), found.commit)


def plan_of(
    cfg: RunConfig,
    benches: list[BenchRun],
    model: ModelSource | None = None,
    family: ModelFamily | None = None,
) -> RunPlan:
    """The plan of ``cfg`` running ``benches`` (resolved by :func:`plan_run`, or made by
    hand by a caller that brings its own samples: ``evalkit.testing.runs``)."""
    model = model or ModelSource(cfg.model)
    return RunPlan(
        config=cfg,
        benches=benches,
        engine=engine_for_mode(cfg.engine, cfg.mode),
        engine_options=dict(cfg.engine_options),
        manifest=run_manifest(cfg, benches, model, family),
        model=model,
    )


def resolve_benchmarks(
    cfg: RunConfig,
    family: ModelFamily | None,
    *,
    check_media: bool = True,
    background: bool = False,
) -> list[BenchRun]:
    """Load every requested benchmark's spec and samples. ``check_media=False`` keeps the
    rows whose media are missing (a run's preflight then names them all at once, or
    records them failed under ``--allow-missing``) instead of leaving them out as invalid."""
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark

    runs: list[BenchRun] = []
    recorded = _resumed_names(cfg)
    for name in cfg.bench:
        spec = get_benchmark(name)  # NAME:VARIANT; an unknown variant is a RegistryError
        root, gate = locate(cfg, spec, background=background)
        # a release of annotations only: its videos in --video-root, as its layout names them
        media = Path(cfg.video_root) if cfg.video_root and spec.data.media_elsewhere else None
        loaded = load(spec, root, check_media=check_media, media_root=media)
        run = bench_run(cfg, spec, loaded, family, problems=loaded.problems)
        run.media_root, run.data, run.media_gate = str(media or root), provenance(spec, root), gate
        if gate is not None:  # those whose media are here first, then archive by archive
            run.samples.sort(key=gate.rank)
        if spec.variant and spec.name in recorded and spec.label not in recorded:
            run.name = spec.name  # a run written before variants were NAME:VARIANT
        runs.append(run)
    if cfg.data:
        runs += data_bench_runs(cfg, family)
    if not runs:
        raise ConfigError("nothing to run: give --bench NAME[,NAME...] and/or --data FILE")
    return runs


def _resumed_names(cfg: RunConfig) -> set[str]:
    """The benchmark names the run ``cfg`` resumes recorded (none for a new run)."""
    rundir = RunDir(cfg.resume) if cfg.resume else None
    if rundir is None or not rundir.config_path.is_file():
        return set()
    return set(rundir.latest().get("result_config", {}).get("benchmarks") or {})


def data_bench_runs(cfg: RunConfig, family: ModelFamily | None) -> list[BenchRun]:
    """The benchmarks of ``cfg.data``: one per known source named by the rows (under its
    official spec and rule), the rest pooled. ``evalkit run --data`` and ``evalkit score
    --data`` both read a file through here, so a file means the same to both."""
    return [run for run, _ in data_bench_pairs(cfg, family)]


def data_bench_pairs(
    cfg: RunConfig, family: ModelFamily | None
) -> list[tuple[BenchRun, DataBench]]:
    """Each benchmark of ``cfg.data`` as run, with what the file said of it (``DataBench``:
    the fields that name its samples, for ``evalkit score``)."""
    from evalkit.bench.unified_known import data_benches

    assert cfg.data is not None
    out = []
    for db in data_benches(cfg.data, cfg.video_root):
        run = bench_run(cfg, db.spec, db.samples, family, problems=db.problems)
        run.name, run.data_info = db.name, db.info(Path(cfg.data))
        run.media_root = str(Path(cfg.video_root or Path(cfg.data).parent))
        run.data = DataProvenance(annotations=_file_digest(Path(cfg.data)), root=cfg.data)
        out.append((run, db))
    return out


def provenance(spec: BenchmarkSpec, root: Path) -> DataProvenance:
    """What ``spec``'s data under ``root`` is: a release fetched from the Hub names its
    dataset and commit (``evalkit.hub``); a copy given by hand, its folder."""
    from evalkit.bench.files import annotation_digest
    from evalkit.hub.home import ReleaseState

    state = ReleaseState.read(root)
    return DataProvenance(
        dataset=state.dataset if state else None,
        commit=state.commit if state else None,
        annotations=annotation_digest(spec.files, root),
        root=str(root),
    )


def _file_digest(path: Path) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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
        name=spec.label,  # a variant is NAME:VARIANT: its own store, never the base's
        spec=spec,
        frame_spec=frame_spec,
        frames_from=frames_from,
        check_prompt_tokens=family is None or family.family.tokens_from_frames,
        sampling=sampling_for(spec.generation, thinking, cfg.max_tokens),
        samples=samples[: cfg.limit] if cfg.limit else list(samples),
        prompt=prompt,
        problems=list(problems or []),
        available=len(samples),
    )


def bench_root(cfg: RunConfig, spec: BenchmarkSpec, *, media: bool = True) -> Path:
    """The folder holding ``spec``'s local copy (see :func:`locate`)."""
    return locate(cfg, spec, media=media)[0]


def locate(
    cfg: RunConfig, spec: BenchmarkSpec, *, media: bool = True, background: bool = False
) -> tuple[Path, Prefetch | None]:
    """The folder holding ``spec``'s local copy: under ``--data-root`` or the spec's own
    ``data.local_path`` where one holds its annotation files, else its release fetched from
    the Hub into ``EVALKIT_DATA`` (the media of the first ``--limit`` samples with it, or
    of all; ``media=False``: the annotations only; ``background``: its zips while the run
    goes, the returned Prefetch). ConfigError naming every folder tried and, where
    fetching is off, the command that fetches it."""
    from evalkit.bench.files import annotation_paths

    tried: list[Path] = []
    if cfg.data_root:
        for cand in (Path(cfg.data_root) / spec.name, Path(cfg.data_root) / spec.key):
            tried.append(cand)
            if cand.is_dir():  # a folder named for the benchmark: read as it is
                return cand, None
        root = Path(cfg.data_root)
        if len(cfg.bench) == 1:  # one benchmark: --data-root may be its folder itself
            tried.append(root)
            holds = all(annotation_paths(fs, root) for fs in spec.files)
            fetchable = spec.data.hf_dataset and not spec.data.by_hand
            if root.is_dir() and (holds or not fetchable):
                return root, None  # (a copy by hand lacking a file: the loader names it)
    if spec.data.local_path:
        tried.append(Path(spec.data.local_path).expanduser())
        if tried[-1].is_dir():
            return tried[-1], None
    where = ", ".join(str(c) for c in tried) or "nothing (no --data-root given)"
    if spec.data.hf_dataset and not spec.data.by_hand:
        from evalkit.hub import FetchDisabled, Need, open_release, release_root

        need = Need(media=media, limit=cfg.limit)
        try:
            if background and media:
                return open_release(spec, need, fetch=cfg.fetch)
            return release_root(spec, need, fetch=cfg.fetch), None
        except FetchDisabled as exc:
            raise FetchDisabled(f"{exc} (no local copy found: tried {where})") from None
    why = spec.data.by_hand or "its release is not on the Hugging Face Hub"
    raise ConfigError(
        f"{spec.name}: no local copy found (tried {where}); {why}: lay it out by hand and "
        f"pass --data-root DIR holding a '{spec.name}' folder (`evalkit bench show "
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


def model_family(cfg: RunConfig, path: str | None = None) -> ModelFamily | None:
    """The family of the run's model: its checkpoint's (``path``: where a hub id's files
    are), or the served model's as the openai engine's ``family`` option names it; None
    when it cannot be known."""
    named = cfg.engine_options.get("family")
    return run_family(path or cfg.model, reads_local_checkpoint(cfg.engine), named)


def result_config(
    cfg: RunConfig, benches: list[BenchRun], model: ModelSource | None = None
) -> ResultConfig:
    """The part of the configuration that can change a result (the run's fingerprint).
    Only the keys set here are hashed (``ResultConfig.dump``): ``rule``, ``frame_cache``
    and ``model_revision`` are left unset at their defaults, as runs made before them
    hashed."""
    model = model or ModelSource(cfg.model)
    optional: dict[str, Any] = {"rule": cfg.rule} if cfg.rule else {}
    if model.revision:
        optional["model_revision"] = model.revision
    optional.update(
        fingerprint_settings(cfg.cache_identity, cfg.cache_codec, cfg.cache_jpeg_quality)
    )
    return ResultConfig(
        model=cfg.model,
        model_hash=hash_path(model.path),
        engine=cfg.engine,
        engine_options=_result_engine_options(cfg.engine, cfg.engine_options),
        variant=cfg.variant,
        judge=_result_judge(cfg.judge),
        benchmarks={
            b.name: BenchmarkSettings(
                spec_hash=hash_json(b.spec.recorded()),
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
    cfg: RunConfig,
    benches: list[BenchRun],
    model: ModelSource | None = None,
    family: ModelFamily | None = None,
) -> RunManifest:
    """The run's manifest: result config (the fingerprint), settings, specs as run, and the
    model's family with the source of each benchmark's frame settings."""
    # how the run was started, not what it is: never compared on resume
    extra = cfg.model_dump(mode="json", exclude={"resume", "force", "retry_failed", "fetch"})
    recorded = None
    if family is not None:
        recorded = {**family.describe(), "frames_from": {b.name: b.frames_from for b in benches}}
    return RunManifest.build(
        result_config(cfg, benches, model),
        extra,
        # the specs as run, so reports aggregate by the rules in force (ad-hoc sets included)
        specs={b.name: b.spec for b in benches},
        data_benchmarks={b.name: b.data_info for b in benches if b.data_info},
        benchmark_samples={b.name: b.available for b in benches if b.available is not None},
        data={b.name: b.data for b in benches if b.data is not None},
        family=recorded,
    )


def refs_of(samples: list[Sample]) -> list[VideoRef]:
    """Every video a list of samples needs (for building the cache ahead of a run)."""
    return [m for s in samples for m in s.media if isinstance(m, VideoRef)]
