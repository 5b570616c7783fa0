"""What a run needs that can be checked before anything is created: the model, the
engine and its options, the data files and folders, every sample's media.

``evalkit run`` calls :func:`check_run` before it makes a run directory, so a typo costs
one line of error, never a traceback after a half-made ``runs/run-*/``; once the
benchmarks are loaded, :func:`check_media` resolves every sample's video and image before
any engine starts (``evalkit bench validate --data`` runs the same check). Every installed
plug-in a run can use is imported first (:func:`check_plugins`; ``evalkit score`` too).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.bench.media import MissingMedia, describe_missing, missing_media
from evalkit.engines import engine_for_mode, reads_local_checkpoint
from evalkit.errors import ConfigError, EvalkitError
from evalkit.plugins import PluginError, problems

if TYPE_CHECKING:
    from evalkit.engines.family import ModelFamily
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import BenchRun
    from evalkit.rundir import RunDir


def check_run(cfg: RunConfig, engine_given: bool = False, probe: bool = True) -> None:
    """ConfigError naming the first bad setting of ``cfg`` and what to do.

    ``engine_given``: the caller brings its own engine, so the model and engine settings
    are the caller's business (tests, the trainer's scripted engines). ``probe=False``: the
    caller asks a served model's server itself, once for many runs (a sweep).
    """
    check_plugins()
    if cfg.on_ray and cfg.mode == "sync":
        raise ConfigError("--mode sync is the single-engine baseline; drop --replicas for it")
    if not engine_given:
        check_model(cfg.model, cfg.engine, fetch=cfg.fetch)
        check_engine_options(engine_for_mode(cfg.engine, cfg.mode), cfg)
        check_served_family(cfg.model, engine_for_mode(cfg.engine, cfg.mode))
        if probe and not cfg.resume:  # a resumed run asks once it has samples left to run
            probe_served(cfg)
    if cfg.data:
        data_file(cfg.data)
    for value, flag in ((cfg.data_root, "--data-root"), (cfg.video_root, "--video-root")):
        if value:
            _dir(value, flag)
    if cfg.cache_root and Path(cfg.cache_root).expanduser().is_file():
        raise ConfigError(f"--cache-root {cfg.cache_root}: is a file; give a folder for the cache")


def check_plugins() -> None:
    """Import every installed plug-in an evaluation can use (benchmarks, task types, rules,
    aggregations, engines, extra metrics) now, in this process, before a run directory or
    an engine exists (the scoring child, forked later, has them as they are here):
    PluginError naming each one that was refused, did not load or hung at import.

    A run does not go on without one: its numbers would not be what the installed
    packages say (a refused one meant its rule to be used; a broken one's rules or
    benchmarks are unknown), so one to fix or uninstall is said before any work.
    """
    from evalkit import tasks
    from evalkit.bench.aggregations import AGGREGATIONS
    from evalkit.bench.registry import registry
    from evalkit.engines import ENGINE_SPECS
    from evalkit.scoring.extras import EXTRAS
    from evalkit.scoring.rules import RULES

    kinds = (registry(), tasks.TASKS, RULES, AGGREGATIONS, ENGINE_SPECS, EXTRAS)
    for kind in kinds:
        kind.load()
    found = problems({k.group for k in kinds if k.group})
    if found:
        said = "; ".join(p.problem or "" for p in found)
        raise PluginError(f"a run needs every plug-in it may use; {len(found)} not loaded: {said}")


def check_model(model: str, engine: str, *, fetch: bool = True) -> None:
    """A local checkpoint folder (with config.json) or a hub id (``org/name[@revision]``,
    fetched before the engine starts: without ``fetch``, or under HF_HUB_OFFLINE, it must
    be in the local Hugging Face cache); the openai engine takes a served name, unchecked."""
    if not reads_local_checkpoint(engine):
        return
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"--model {model}: no config.json in this folder; give the checkpoint folder "
                "(the one holding config.json and the weights)"
            )
        return
    if path.exists():
        raise ConfigError(
            f"--model {model}: is a file; give the checkpoint folder (the one holding config.json)"
        )
    from evalkit.hub import hub_offline
    from evalkit.hub.models import hub_id, model_from_hub

    if hub_id(model) is None:
        raise ConfigError(
            f"--model {model}: no such checkpoint folder (and not a hub id org/name[@revision]); "
            "check the path"
        )
    if not fetch or hub_offline():
        model_from_hub(model, fetch=False)  # in the cache, or one line naming the fetch


def probe_served(cfg: RunConfig, *, judge_only: bool = False) -> None:
    """Ask a served model's server, the run's and the judge's, once before the run
    (``EngineSpec.probe``): a dead server or a name it does not serve is one line in
    seconds, not a failed sample each. ``judge_only``: the run's engine is the caller's."""
    from evalkit.engines import probe

    if not judge_only:
        probe(engine_for_mode(cfg.engine, cfg.mode), cfg.model, cfg.engine_options)
    if cfg.judge is not None:
        from evalkit.run.config import judge_engine_options

        jc = cfg.judge
        probe(
            jc.engine,
            jc.model,
            judge_engine_options(jc),
            flag="--judge-engine",
            opt_flag="--judge-opt",
        )


def check_engine_options(name: str, cfg: RunConfig) -> None:
    """The engine exists and its options validate (typed config), before it is built."""
    from evalkit.engines import engine_config

    # RegistryError: an unknown engine, with a hint; ConfigError: a bad option, in one line
    config = engine_config(name, cfg.model, cfg.engine_options, where="--engine-opt for engine")
    trusted = getattr(config, "trust_remote_code", None)
    if isinstance(trusted, bool):  # an engine that can run a checkpoint's own code
        check_trust(cfg.model, trusted)


def check_trust(model: str, trusted: bool) -> None:
    """A local checkpoint of a family that ships its own code needs --trust-remote-code,
    said before any run directory exists (the engine would refuse it only once started)."""
    from evalkit.engines.family import require_trust

    family = _local_family(model)
    if family is not None:
        require_trust(family, model, trusted)


def check_served_family(model: str, engine: str) -> None:
    """A local checkpoint of a family vLLM 0.32 cannot serve, given to an engine that runs
    vLLM's model classes: ConfigError in one line, before any frame is cached."""
    from evalkit.engines import ENGINE_SPECS, engine_spec

    if engine not in ENGINE_SPECS or not engine_spec(engine).vllm_model:
        return
    family = _local_family(model)
    if family is not None and family.family.vllm_refusal:
        raise ConfigError(f"--model {model}: {family.family.vllm_refusal}")


def _local_family(model: str) -> ModelFamily | None:
    """The family of ``model`` where it is a local checkpoint of a known family; None
    otherwise (a served or hub model; an unknown family, which the run's plan or the engine
    names in its own words)."""
    from evalkit.engines.family import detect_family

    path = Path(model).expanduser()
    if not path.is_dir():
        return None
    try:
        return detect_family(path)
    except EvalkitError:
        return None


def data_file(path: str, as_bench: str = "--bench {}") -> Path:
    """``--data`` as an annotation file that exists (``run``, ``score``, ``bench validate``).
    A benchmark's name given there (VLMEvalKit's ``--data MVBench`` habit) is told how the
    command takes a benchmark (``as_bench``, ``{}`` standing for the name given)."""
    p = Path(path).expanduser()
    if not p.exists():
        bench = _benchmark_named(path)
        if bench is not None:
            raise ConfigError(
                f"--data {path}: no such file; {bench} is a benchmark: give it as "
                f"{as_bench.format(path)} (--data takes an annotation file of your own)"
            )
        raise ConfigError(f"--data {path}: no such file; check the path")
    if p.is_dir():
        raise ConfigError(f"--data {path}: is a folder; give the JSON/JSONL file")
    return p


def _benchmark_named(text: str) -> str | None:
    # only a bare word can be meant as a name ("MVBench", "videomme", "Video-MME:w_subs")
    if os.sep in text or "." in Path(text).name:
        return None
    from evalkit.bench.registry import get_benchmark
    from evalkit.errors import EvalkitError

    try:
        return get_benchmark(text).name
    except EvalkitError:
        return None


def _dir(path: str, flag: str) -> None:
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"{flag} {path}: no such folder; check the path")
    if not p.is_dir():
        raise ConfigError(f"{flag} {path}: is a file; give a folder")


def check_media(found: list[MissingMedia], *, allow_missing: bool) -> None:
    """ConfigError (one line: the count, the first paths, the folder searched, what to do)
    when media are missing, unless ``allow_missing``."""
    found = [m for m in found if m.missing]
    if not found or allow_missing:
        return
    raise ConfigError(describe_missing(found) + _WHAT_TO_DO)


_WHAT_TO_DO = (
    "; give --video-root the folder that holds them (--data-root for --bench), or "
    "--allow-missing to run the rest and record these as failed"
)


def media_preflight(cfg: RunConfig, benches: list[BenchRun]) -> dict[str, MissingMedia]:
    """Resolve every sample's media of ``benches`` before any engine starts:
    ConfigError when some are missing (unless ``cfg.allow_missing``); the missing ones
    per benchmark otherwise."""
    found = {
        b.name: missing_media(
            b.name,
            b.samples,
            b.media_root or ".",
            coming=b.media_gate.expects if b.media_gate is not None else None,
        )
        for b in benches
    }
    check_media(list(found.values()), allow_missing=cfg.allow_missing)
    return {name: m for name, m in found.items() if m.missing}


def record_missing(
    rundir: RunDir, benches: list[BenchRun], found: dict[str, MissingMedia], fingerprint: str
) -> dict[str, int]:
    """``--allow-missing``: record each sample whose media are missing as failed (stage
    ``media``, once: a resumed run keeps its record) and leave it out of the samples the
    engine sees. Returns the samples recorded now, per benchmark."""
    import time

    from evalkit.records import failed_record

    recorded: dict[str, int] = {}
    for b in benches:
        m = found.get(b.name)
        if m is None:
            continue
        gone = {s.id for s in m.samples}
        with rundir.store(b.name) as store:
            done = store.done_ids(include_failed=True)
            new = [
                failed_record(
                    s,
                    "media",
                    m.reason(s),
                    fingerprint=fingerprint,
                    timings={"failed": time.time()},
                )
                for s in m.samples
                if s.id not in done
            ]
            if new:
                store.append_many(new)
        recorded[b.name] = len(new)
        b.samples = [s for s in b.samples if s.id not in gone]
    return recorded
