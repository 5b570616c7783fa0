"""Write run directories by hand, in the exact layout ``evalkit run`` produces.

For tests and examples of the report: a ``config.json`` with the result config (model,
engine, prompt variant, per-benchmark spec hash, frames, max_tokens) and one store per
benchmark holding ``ok`` / ``failed`` records written by the pipeline's own record writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.records import SampleRecord, failed_record, ok_record
from evalkit.rundir import RunDir, hash_json
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.scoring.verdicts import Verdicts


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


def record(rec: Rec, benchmark: str, fingerprint: str = "") -> dict[str, Any]:
    """The store record the pipeline would write for ``rec`` (by the pipeline's writer)."""
    out = _written(rec, benchmark, fingerprint)
    if rec.replica is None:
        return out
    # a replica tags the writer's record with its name, as evalkit.scale's replicas do
    return SampleRecord.model_validate({**out, "replica": rec.replica}).dump()


def _written(rec: Rec, benchmark: str, fingerprint: str) -> dict[str, Any]:
    sample = Sample(
        id=rec.id,
        task_type=rec.task_type,
        question="",
        target=rec.target,
        benchmark=benchmark,
        fields=rec.fields,
    )
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
    )


def write_run(
    path: str | Path,
    model: str,
    benches: dict[str, list[Rec]],
    *,
    variant: str | None = None,
    prompt_variant: str = "plain",
    frames: dict[str, Any] | None = None,
    max_tokens: int | None = None,
) -> Path:
    """A run directory with one store per benchmark (registry names or ad-hoc names).

    ``frames`` overrides the spec's pinned frame settings, ``variant`` picks a spec variant
    (recorded through the spec hash and the ``--bench NAME:VARIANT`` list, as a run does).
    """
    run, fp, names = open_run(
        path,
        model,
        list(benches),
        variant=variant,
        prompt_variant=prompt_variant,
        frames=frames,
        max_tokens=max_tokens,
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
    prompt_variant: str = "plain",
    frames: dict[str, Any] | None = None,
    max_tokens: int | None = None,
) -> tuple[RunDir, str, list[str]]:
    """Write ``config.json`` as ``evalkit run`` would; returns (run, fingerprint, names)."""
    from evalkit.bench.registry import get_benchmark
    from evalkit.registry import RegistryError

    entries: dict[str, Any] = {}
    bench_list = []
    for name in benches:
        try:
            spec = get_benchmark(name).with_variant(variant)
        except RegistryError:
            spec = None
        if spec is None:
            entries[name] = {
                "spec_hash": None,
                "data": f"{name}.jsonl",
                "frames": {"fps": 2.0, **(frames or {})},
                "max_tokens": max_tokens or 256,
            }
            bench_list.append(name)
            continue
        gen = spec.generation
        cap = gen.max_tokens if prompt_variant == "plain" else gen.max_tokens_thinking
        entries[spec.name] = {
            "spec_hash": hash_json(spec.model_dump(mode="json")),
            "data": None,
            "frames": {**spec.frames.model_dump(mode="json"), **(frames or {})},
            "max_tokens": max_tokens or cap,
        }
        bench_list.append(f"{spec.name}:{variant}" if variant else spec.name)
    result_config = {
        "model": model,
        "model_hash": hash_json(model),
        "engine": "vllm",
        "engine_options": {},
        "variant": prompt_variant,
        "benchmarks": entries,
    }
    run = RunDir(path)
    fp = run.open(result_config, {"bench": bench_list, "model": model}, force=False)
    return run, fp, list(entries)
