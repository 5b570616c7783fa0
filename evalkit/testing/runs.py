"""Run directories for tests and examples of the report, written by the product's writers.

``open_run`` opens the directory through the runner's own ``open_run`` (the same
``RunManifest`` and ``RunDir`` as ``evalkit run``: result config, specs as run, versions),
from a ``RunConfig`` and the benchmarks as the runner resolves them; ``write_run`` then
appends ``ok`` / ``failed`` records made by the pipeline's record writers. Only the
samples' outcomes are scripted (``Rec``), never the shape of the directory.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.manifest import DataProvenance
from evalkit.records import SampleRecord, failed_record, ok_record
from evalkit.rundir import RunDir
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.scoring.verdicts import Verdicts

if TYPE_CHECKING:
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import BenchRun


@dataclass
class Rec:
    """One sample's outcome: a score value (None = unscored), or failed at ``stage``.

    ``rule`` names the headline extraction rule; ``rules`` gives the value under each
    other rule (the record then carries them as a run does).
    """

    id: str
    value: float | None = 1.0
    fields: dict[str, Any] = field(default_factory=dict)
    task_type: str = "multiple_choice"
    target: Any = "A"
    failed_stage: str | None = None
    timings: dict[str, float] | None = None
    rule: str | None = None
    rules: dict[str, float | None] = field(default_factory=dict)
    prediction: str = "A"
    replica: str | None = None
    """The replica that produced the record (a run with ``--replicas``)."""
    prompt: str | None = None
    """The prompt text the model was asked (kept in the record as a run keeps it)."""


def record(rec: Rec, benchmark: str, fingerprint: str = "") -> SampleRecord:
    """The store record the pipeline would write for ``rec`` (by the pipeline's writer)."""
    out = _written(rec, benchmark, fingerprint)
    # a replica stamps the writer's record with its name, as evalkit.scale's replicas do
    return out if rec.replica is None else out.stamped(rec.replica)


def sample_of(rec: Rec, benchmark: str) -> Sample:
    """The sample ``rec`` stands for (what a record keeps of it: task type, target, fields)."""
    return Sample(
        id=rec.id,
        task_type=rec.task_type,
        question="",
        target=rec.target,
        benchmark=benchmark,
        fields=rec.fields,
    )


def _written(rec: Rec, benchmark: str, fingerprint: str) -> SampleRecord:
    sample = sample_of(rec, benchmark)
    timings = rec.timings or {}
    if rec.failed_stage:
        error = "EngineError: synthetic failure"
        return failed_record(
            sample, rec.failed_stage, error, fingerprint=fingerprint, timings=timings
        )
    score = Score(rec.value, "A")
    others = {name: Score(v, "A") for name, v in rec.rules.items()}
    result = Verdicts(score, rec.rule, others) if rec.rule else score
    return ok_record(
        sample,
        result,
        [rec.prediction],
        fingerprint=fingerprint,
        timings=timings,
        prompt_hash="0" * 16,
        tokens={"prompt": 100, "output": 4},
        prompt={"text": rec.prompt} if rec.prompt is not None else None,
    )


def write_run(
    path: str | Path,
    model: str,
    benches: dict[str, list[Rec]],
    *,
    variant: str | None = None,
    prompt_variant: str | None = "plain",
    frames: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    data: dict[str, DataProvenance] | None = None,
) -> Path:
    """A run directory with one store per benchmark (registry names or ad-hoc names).

    ``frames`` overrides the spec's pinned frame settings, ``variant`` picks a spec variant
    (``--bench NAME:VARIANT``), ``prompt_variant`` is ``--variant`` (None: each spec's
    pinned one), ``max_tokens`` is ``--max-tokens``, ``data`` the data each benchmark read
    (as the run's plan records it). A name the registry does not know is an ad-hoc
    ``--data`` file of that stem (rows of no known benchmark: a pooled mean).
    """
    run, fp, names = open_run(
        path,
        model,
        list(benches),
        variant=variant,
        prompt_variant=prompt_variant,
        frames=frames,
        max_tokens=max_tokens,
        samples={name: [sample_of(r, name) for r in recs] for name, recs in benches.items()},
        data=data,
    )
    for recs, stored in zip(benches.values(), names, strict=True):
        with run.store(stored) as store:
            for r in recs:
                store.append(record(r, stored, fp))
    return run.path


def open_run(
    path: str | Path,
    model: str,
    benches: list[str],
    *,
    variant: str | None = None,
    prompt_variant: str | None = "plain",
    frames: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    samples: dict[str, list[Sample]] | None = None,
    data: dict[str, DataProvenance] | None = None,
) -> tuple[RunDir, str, list[str]]:
    """Open the run as ``evalkit run`` would (``evalkit.run.open.open_run``); returns (run,
    fingerprint, the benchmarks' names in the run)."""
    from evalkit.bench.registry import get_benchmark
    from evalkit.run.config import RunConfig
    from evalkit.run.open import open_run
    from evalkit.run.plan import bench_run, plan_of

    path = Path(path)
    known = [b for b in benches if _known(b)]
    adhoc = [path.parent / f"{b}.jsonl" for b in benches if b not in known]
    if len(adhoc) > 1:
        raise ValueError(f"one ad-hoc --data file per run, got {len(adhoc)}: {adhoc}")
    cfg = RunConfig.model_validate(
        {
            "model": model,
            "bench": [f"{b}:{variant}" if variant else b for b in known],
            "data": str(adhoc[0]) if adhoc else None,
            "variant": prompt_variant,
            "frames": frames or {},
            "max_tokens": max_tokens,
            "runs_dir": str(path.parent),
            "run_id": path.name,
        }
    )
    runs = []
    for name in benches:
        given = (samples or {}).get(name, [])
        if name in known:
            spec = get_benchmark(name).with_variant(variant)
            runs.append(bench_run(cfg, spec, given, None))
        else:
            runs.append(_adhoc(cfg, path, name, given))
        # what a run records of the data it read: here, nothing was read
        empty = DataProvenance(annotations=hashlib.sha256().hexdigest(), root=str(path.parent))
        runs[-1].data = (data or {}).get(name, empty)
    with open_run(plan_of(cfg, runs), path) as opened:
        return opened.dir, opened.fingerprint, [b.name for b in runs]


def _known(name: str) -> bool:
    from evalkit.bench.registry import get_benchmark
    from evalkit.registry import RegistryError

    try:
        get_benchmark(name)
    except RegistryError:
        return False
    return True


def _adhoc(cfg: RunConfig, path: Path, name: str, samples: list[Sample]) -> BenchRun:
    """An ad-hoc ``--data`` benchmark of rows of no known source (``data_benches``)."""
    from evalkit.bench.unified import unified_spec
    from evalkit.bench.unified_known import UNKNOWN_ROWS_NOTE, DataBench
    from evalkit.run.plan import bench_run

    file = path.parent / f"{name}.jsonl"  # never read: the records carry what a report needs
    db = DataBench(name, unified_spec(file), samples, note=UNKNOWN_ROWS_NOTE)
    run = bench_run(cfg, db.spec, db.samples, None)
    run.name, run.data_info = db.name, db.info(file)
    return run
