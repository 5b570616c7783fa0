"""``evalkit sweep``: one run directory per setting of a grid, from one engine start and
one decode per video.

A sweep is a base RunConfig and a grid of request properties (frames, prompt variant,
generation cap). Each setting is an ordinary run (``evalkit run`` with those values writes
the same directory, fingerprint included) under one sweep directory, with ``sweep.json``
naming the axes and the settings. Before the settings run, every video is decoded once for
all the settings' FrameSpecs into the frame cache; then one engine serves every setting,
the settings' pipelines running side by side on one event loop. With ``--replicas N`` the
settings' plans go to one set of Ray replicas (``evalkit.scale.driver.run_plans``): each
replica starts its engine once and takes leases of any setting from one work queue, while
the videos are decoded here.

A sweep is one process tree of bounded size: the settings share the engine, the judge's
engine, the processes that decode cache misses and a few scoring processes
(:func:`scoring_processes`), however many settings there are. The sweep directory's lock
is taken before anything else (:func:`hold`), so a second sweep of it is refused before its
engine starts or ``sweep.json`` is written.

Everything this module asks of the runner goes through :class:`Runner` (one place to
switch when the run path moves).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from evalkit.atomic import write_text_atomic
from evalkit.errors import ConfigError, DataError
from evalkit.registry import did_you_mean
from evalkit.run.config import RunConfig
from evalkit.rundir import RunDir
from evalkit.runlock import RunLock
from evalkit.sample import VideoRef
from evalkit.startup import StartupTimes
from evalkit.video.types import FrameSpec

if TYPE_CHECKING:
    from evalkit.cache import FrameCache
    from evalkit.engines.base import Engine
    from evalkit.run.components import SharedParts
    from evalkit.run.execute import RunResult
    from evalkit.run.plan import BenchRun, RunPlan
    from evalkit.scale.driver import Progress

SCHEMA = 1
MANIFEST = "sweep.json"

# grid key -> the RunConfig field path it sets
GRID_KEYS: dict[str, tuple[str, ...]] = {
    "frames.max_frames": ("frames", "max_frames"),
    "frames.nframes": ("frames", "nframes"),
    "frames.fps": ("frames", "fps"),
    "frames.max_pixels": ("frames", "max_pixels"),
    "frames.min_pixels": ("frames", "min_pixels"),
    "frames.total_pixels": ("frames", "total_pixels"),
    "frames.resize": ("frames", "resize"),
    "prompt.variant": ("variant",),
    "generation.max_tokens": ("max_tokens",),
}


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``--grid KEY=V1,V2,...`` items -> {key: [values]} (YAML scalars), in order given."""
    axes: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise ConfigError(f"--grid {item!r}: expected KEY=V1,V2,... (e.g. frames.nframes=8,16)")
        if key not in GRID_KEYS:
            hint = did_you_mean(key, list(GRID_KEYS))
            raise ConfigError(
                f"--grid {key}: not a sweepable setting{hint} (sweepable: {', '.join(GRID_KEYS)})"
            )
        if key in axes:
            raise ConfigError(f"--grid {key}: given twice; list all its values in one --grid")
        axes[key] = [yaml.safe_load(v.strip()) for v in values.split(",")]
        if len({json.dumps(v) for v in axes[key]}) < len(axes[key]):
            raise ConfigError(f"--grid {item!r}: a value is listed twice")
    if not axes:
        raise ConfigError("evalkit sweep needs at least one --grid KEY=V1,V2,...")
    return axes


def combinations(axes: dict[str, list[Any]], zipped: bool) -> list[dict[str, Any]]:
    """The settings of the grid: the cross product, or the values paired (``--zip``)."""
    keys = list(axes)
    if zipped:
        lengths = {k: len(v) for k, v in axes.items()}
        if len(set(lengths.values())) > 1:
            said = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            raise ConfigError(
                f"--zip pairs the values of each --grid: their counts differ ({said})"
            )
        rows = list(zip(*axes.values(), strict=True))
    else:
        rows = list(itertools.product(*axes.values()))
    return [dict(zip(keys, row, strict=True)) for row in rows]


def run_name(values: dict[str, Any]) -> str:
    """A filesystem-safe run directory name from a setting's values."""
    parts = []
    for key, value in values.items():
        short = key.split(".", 1)[1]
        parts.append(f"{short}-{value}")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts))


def setting_config(
    base: RunConfig, values: dict[str, Any], sweep_dir: Path, name: str
) -> RunConfig:
    """The RunConfig of one setting (validated by RunConfig itself; a bad value is one line)."""
    data = base.model_dump(exclude={"resume", "run_id", "runs_dir"})
    for key, value in values.items():
        where = data
        *parents, last = GRID_KEYS[key]
        for p in parents:
            where = where[p]
        where[last] = value
    path = sweep_dir / name
    if (path / "config.json").is_file():
        data["resume"] = str(path)
    else:
        data["runs_dir"], data["run_id"] = str(sweep_dir), name
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        key = next(iter(values))
        for k in values:  # name the value pydantic refused
            if any(tuple(e["loc"][: len(GRID_KEYS[k])]) == GRID_KEYS[k] for e in exc.errors()):
                key = k
        why = "; ".join(e["msg"] for e in exc.errors())
        raise ConfigError(f"--grid {key}={values[key]}: {why}") from None


@dataclass
class Setting:
    """One point of the grid: its values, its run directory's name and config."""

    id: str
    values: dict[str, Any]
    run: str
    cfg: RunConfig
    plan: RunPlan | None = None
    """Its run plan, once the sweep is prepared (:func:`prepare`)."""


@dataclass
class Sweep:
    """A sweep's directory, base config, axes and settings (``sweep.json``)."""

    path: Path
    base: RunConfig
    axes: dict[str, list[Any]]
    zipped: bool
    settings: list[Setting]

    @classmethod
    def plan(cls, base: RunConfig, axes: dict[str, list[Any]], zipped: bool, path: Path) -> Sweep:
        rows = combinations(axes, zipped)
        settings = []
        for i, values in enumerate(rows):
            name = run_name(values)
            cfg = setting_config(base, values, path, name)
            settings.append(Setting(f"s{i:02d}", values, name, cfg))
        return cls(path, base, axes, zipped, settings)

    @classmethod
    def resume(cls, path: Path, axes: dict[str, list[Any]] | None, zipped: bool | None) -> Sweep:
        """The sweep recorded in ``path``; a different grid asked for is refused."""
        manifest = recorded(path)
        from evalkit.reports.sweep import read_manifest

        doc = read_manifest(path)  # the report's reader: a damaged one is one line naming it
        zip_recorded = doc.get("zip") is True
        if axes and (axes != doc["axes"] or bool(zipped) != zip_recorded):
            raise ConfigError(
                f"--resume {path}: the sweep's grid is {doc['axes']} (zip {zip_recorded}); "
                "a different --grid needs a new --sweep-dir"
            )
        try:
            base = RunConfig.model_validate(doc.get("base"))
        except ValidationError as exc:
            why = exc.errors()[0]
            where = ".".join(str(p) for p in why["loc"]) or "base"
            raise DataError(f"{manifest}: field 'base' ({where}): {why['msg']}") from None
        return cls.plan(base, doc["axes"], zip_recorded, path)

    def write(self, pinned: dict[str, dict[str, Any]], benchmarks: Sequence[str]) -> None:
        """``sweep.json``, written atomically; ``benchmarks``: the names each setting's run
        records them under (a ``--data`` file's included)."""
        doc = {
            "schema": SCHEMA,
            "kind": "evalkit-sweep",
            "axes": self.axes,
            "zip": self.zipped,
            "base": self.base.model_dump(mode="json", exclude={"resume", "run_id", "runs_dir"}),
            "settings": [{"id": s.id, "values": s.values, "run": s.run} for s in self.settings],
            "pinned": pinned,
            "benchmarks": list(benchmarks),
        }
        self.path.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path / MANIFEST, json.dumps(doc, indent=2) + "\n")


def recorded(path: Path) -> Path:
    """The manifest of the sweep in ``path`` (``--resume``); a one-line ConfigError when
    there is none."""
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise ConfigError(f"--resume {path}: not a sweep directory (no {MANIFEST})")
    return manifest


def pinned_values(benches: Sequence[BenchRun], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each benchmark's pinned value of each swept key, from its spec as run (an ad-hoc
    ``--data`` file's generated one included; None: not pinned)."""
    out: dict[str, dict[str, Any]] = {}
    for bench in benches:
        spec = bench.spec
        values: dict[str, Any] = {}
        for key in keys:
            field = GRID_KEYS[key][-1]
            if key.startswith("frames."):
                values[key] = getattr(spec.frames, field, None)
            elif key == "prompt.variant":
                values[key] = spec.prompt.variant
            else:
                values[key] = getattr(spec.generation, field, None)
        out[bench.name] = values
    return out


MAX_SCORING_PROCESSES = 4
"""The most scoring processes a sweep shares (see :func:`scoring_processes`)."""


def scoring_processes(settings: int) -> int:
    """How many scoring processes a sweep of ``settings`` settings shares: a run has one,
    and a sweep's settings together ask no more of it than a run (their replies come from
    the same one engine), so a run's one would mostly keep up. One per core, up to
    ``MAX_SCORING_PROCESSES``, so that a reply held to the scoring budget (a rule slow on
    it, a program in the sandbox) does not hold up every setting behind it; no more,
    since scoring is CPU work and each may keep sandboxes started ahead of code answers."""
    from evalkit.cache.build import usable_cpus

    return max(1, min(settings, usable_cpus(), MAX_SCORING_PROCESSES))


_held: dict[Path, RunLock] = {}


@contextlib.contextmanager
def hold(path: Path) -> Iterator[RunLock]:
    """The sweep directory's lock (``path/.lock``, as a run directory's: the one writer,
    named to whoever else tries), held until the block ends; taken once per process (a
    block inside another of the same sweep holds nothing more). A directory made for it
    and left empty is removed on release."""
    key = path.resolve()
    if key in _held:
        yield _held[key]
        return
    with RunLock(path) as lock:
        _held[key] = lock
        try:
            yield lock
        finally:
            del _held[key]


class Runner:
    """The sweep's one door into the run path: a plan per setting (resolved once), the
    one engine, the runs."""

    @staticmethod
    def plan(cfg: RunConfig) -> RunPlan:
        """The setting's run plan (its settings checked as a run checks them, the model and
        engine settings included; a served model's server is asked once for the whole
        sweep, by :func:`prepare`)."""
        from evalkit.run.plan import plan_run
        from evalkit.run.preflight import check_run

        check_run(cfg, probe=False)
        return plan_run(cfg)

    @staticmethod
    def probe(cfg: RunConfig) -> None:
        """Ask a served model's server (and the judge's) once, before any setting runs."""
        from evalkit.run.preflight import probe_served

        probe_served(cfg)

    @staticmethod
    def frame_jobs(plans: Sequence[RunPlan]) -> Jobs:
        """(videos, every plan's FrameSpecs for them), one pair per benchmark."""
        from evalkit.run.plan import refs_of

        by_bench: dict[str, tuple[dict[VideoRef, None], dict[FrameSpec, None]]] = {}
        for plan in plans:
            for b in plan.benches:
                refs, specs = by_bench.setdefault(b.name, ({}, {}))
                refs.update(dict.fromkeys(refs_of(b.samples)))
                specs[b.frame_spec] = None
        return [(list(refs), list(specs)) for refs, specs in by_bench.values()]

    @staticmethod
    def finished(plan: RunPlan) -> bool:
        """Whether the setting's run directory already records every sample."""
        cfg = plan.config
        if not cfg.resume:
            return False
        from evalkit.run.resume import pending
        from evalkit.rundir import RunDir

        done_failed = cfg.mode == "sync" or not cfg.retry_failed
        left = pending(RunDir(cfg.resume), plan.benches, include_failed=done_failed)
        return not any(left.values())

    @staticmethod
    def cache(cfg: RunConfig) -> FrameCache:
        from evalkit.run.components import make_cache

        return make_cache(cfg)

    @staticmethod
    async def start_engine(plan: RunPlan) -> Engine:
        from evalkit.engines.lifecycle import in_daemon_thread
        from evalkit.run import execute

        # the name `evalkit run` builds its engine by (one place to script it in tests)
        return await in_daemon_thread(execute.make_engine, plan)

    @staticmethod
    async def start_judge(cfg: RunConfig) -> Engine | None:
        """The judge's engine for every setting (None without a judge): one, not one per
        setting (a local judge is an engine of its own)."""
        if cfg.judge is None:
            return None
        from evalkit.engines.lifecycle import in_daemon_thread
        from evalkit.run import components

        jc = cfg.judge
        options = components.judge_engine_options(jc)
        return await in_daemon_thread(components.build, jc.engine, jc.model, options)

    @staticmethod
    async def close_engine(engine: Engine) -> None:
        from evalkit.engines.lifecycle import close_engine

        await close_engine(engine)

    @staticmethod
    def shared(cfg: RunConfig, settings: int) -> contextlib.AbstractContextManager[SharedParts]:
        """The decoding and scoring processes every setting's run shares."""
        from evalkit.run.components import shared_parts

        return shared_parts(cfg, scoring_processes(settings))

    @staticmethod
    async def run(
        plan: RunPlan, engine: Engine, shared: SharedParts, judge: Engine | None = None
    ) -> RunResult:
        from evalkit.run.execute import aexecute

        return await aexecute(plan, engine=engine, judge_engine=judge, shared=shared)


Jobs = list[tuple[list[VideoRef], list[FrameSpec]]]


def decode_once(jobs: Jobs, cfg: RunConfig) -> float:
    """Decode every video of ``jobs`` (:meth:`Runner.frame_jobs`) once for all its
    FrameSpecs into the frame cache (the cache builder's pool); the seconds it took.
    Failures are left to the runs (each records or reports its missing media)."""
    from evalkit.cache.build import beside_engine, build

    seconds = 0.0
    cache = Runner.cache(cfg)
    procs = beside_engine(cfg.cache_workers)  # as a run's warm-up: the engine is starting
    for refs, specs in jobs:
        if refs:
            report = build(cache, refs, specs, workers=procs, progress=False)
            seconds += report.seconds
    return seconds


async def arun(sweep: Sweep, todo: Sequence[Setting], jobs: Jobs) -> tuple[dict[str, Any], float]:
    """The settings ``todo`` through one engine, side by side, once every video of
    ``jobs`` is decoded (the decoding runs while the engine starts); ({setting id:
    RunResult}, decode seconds)."""
    if not todo:
        return {}, 0.0
    plans = [_planned(s) for s in todo]
    cfg = plans[0].config  # the grid never touches the engine, the model or the judge
    starting = asyncio.ensure_future(_timed(Runner.start_engine(plans[0])))
    try:
        decode_s = await asyncio.to_thread(decode_once, jobs, todo[0].cfg)
    except BaseException:
        await Runner.close_engine((await starting)[0])
        raise
    engine, start_s = await starting
    startup = StartupTimes(engines_s=start_s)
    try:
        judge = await Runner.start_judge(cfg)
        try:
            with Runner.shared(cfg, len(plans)) as shared:
                runs = [asyncio.ensure_future(Runner.run(p, engine, shared, judge)) for p in plans]
                results = await _all(runs)
        finally:
            if judge is not None:
                await Runner.close_engine(judge)
    finally:
        await Runner.close_engine(engine)
    for result in results:  # every setting's run started with the sweep's one engine
        startup.write(RunDir(result.path))
    return {s.id: r for s, r in zip(todo, results, strict=True)}, decode_s


async def _all(runs: Sequence[asyncio.Future[RunResult]]) -> list[RunResult]:
    """Every run's result; the first to fail stops the others (cancelled and awaited, so
    each closes what it opened), and its error is raised. A signal's exception is never
    raised here: it left the loop from the task it hit, and the sweep is cancelled next."""
    try:
        await asyncio.wait(runs, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
    for run in runs:
        if not run.cancelled() and (exc := run.exception()) is not None:
            raise exc
    return [run.result() for run in runs]


async def _timed(starting: Awaitable[Engine]) -> tuple[Engine, float]:
    t0 = time.perf_counter()
    engine = await starting
    return engine, time.perf_counter() - t0


def prepare(sweep: Sweep) -> tuple[list[Setting], Jobs]:
    """The unfinished settings and the frame work of them all, each setting checked against
    every benchmark (a FrameSpec a setting makes invalid is one line, before any engine)."""
    for s in sweep.settings:
        s.plan = Runner.plan(s.cfg)
    todo = [s for s in sweep.settings if not Runner.finished(_planned(s))]
    if todo:  # the grid never touches the engine: one question for every setting
        Runner.probe(todo[0].cfg)
    return todo, Runner.frame_jobs([_planned(s) for s in todo])


def _planned(setting: Setting) -> RunPlan:
    if setting.plan is None:
        raise RuntimeError(f"sweep setting {setting.id}: run before prepare()")
    return setting.plan


def execute(
    sweep: Sweep,
    prepared: tuple[list[Setting], Jobs] | None = None,
    on_progress: Progress | None = None,
) -> tuple[dict[str, Any], float]:
    """Under the sweep directory's lock (:func:`hold`): write ``sweep.json``, decode every
    video once, run the unfinished settings on one engine, or on one set of Ray replicas
    with ``--replicas`` (none starts when every setting's run is complete).
    ``on_progress``: the replicas' progress display."""
    from evalkit.engines.lifecycle import run_to_end

    with hold(sweep.path):
        todo, jobs = prepared or prepare(sweep)
        benches = _planned(sweep.settings[0]).benches
        sweep.write(pinned_values(benches, list(sweep.axes)), [b.name for b in benches])
        if sweep.base.on_ray:
            return run_on_replicas(todo, jobs, on_progress)
        return run_to_end(arun(sweep, todo, jobs))


def run_on_replicas(
    todo: Sequence[Setting], jobs: Jobs, on_progress: Progress | None = None
) -> tuple[dict[str, Any], float]:
    """The settings ``todo`` on one set of Ray replicas (each started once, holding every
    setting's plan; one work queue leases the settings' samples side by side), every
    video of ``jobs`` decoded here while Ray and the engines start, before the first
    lease; ({setting id: RunResult}, decode seconds)."""
    if not todo:
        return {}, 0.0
    from concurrent.futures import ThreadPoolExecutor

    from evalkit.scale.driver import run_plans

    pool = ThreadPoolExecutor(1, thread_name_prefix="sweep-decode")
    decoding = pool.submit(decode_once, jobs, todo[0].cfg)
    try:
        plans = [_planned(s) for s in todo]
        results = run_plans(plans, on_progress, before_work=decoding.result)
    finally:  # a failed or stopped sweep does not wait for the decoding here
        pool.shutdown(wait=False, cancel_futures=True)
    return {s.id: r for s, r in zip(todo, results, strict=True)}, decoding.result()


def show(sweep: Sweep) -> None:
    """The sweep report in the terminal (``evalkit.reports.sweep``: each benchmark's score
    by setting, paired intervals, the setting that moves it most); ``evalkit report DIR``
    writes it as Markdown and HTML too."""
    from evalkit.reports.sweep import render_terminal

    print(render_terminal(sweep.path), end="")
