"""A run directory -> per-benchmark official aggregates, counts, settings and timings.

Everything here is read from the run directory alone (``config.json`` + one JSONL store
per benchmark): records carry the sample's task type, target and breakdown fields, so no
dataset is needed. The official rule comes from the benchmark's spec in the registry; a
benchmark without a spec (an ad-hoc ``--data`` file) gets a pooled mean broken down by
task type, labelled as such.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from evalkit.bench.aggregations import AGGREGATIONS, AggregateResult, Scored, aggregate
from evalkit.bench.unified_known import recorded_data_spec
from evalkit.errors import DataError
from evalkit.rundir import RunDir, hash_json
from evalkit.sample import Sample

from .judging import judge_notes
from .model import BenchmarkReport, Counts, FailedPolicy, RunReport
from .provenance import check_records, provenance_note, rejected_notes, split_foreign
from .sensitivity import sensitivity
from .uncertainty import standard_error

ADHOC_AGGREGATION = "pooled mean by task_type (ad-hoc data: no official spec)"
_SCORED_HAS_METADATA = "metadata" in {f.name for f in dataclasses.fields(Scored)}


def load_run(
    path: str | Path, *, failed: FailedPolicy = "zero", bootstrap: int = 1000, seed: int = 0
) -> RunReport:
    """Read a run directory and compute every benchmark's official aggregate and error."""
    rundir = RunDir(path)
    if not rundir.config_path.is_file():
        raise DataError(f"{rundir.path}: not a run directory (no config.json)")
    config = rundir.config()
    configurations = rundir.configurations()
    benches = dict((config.get("result_config") or {}).get("benchmarks") or {})
    by_file = {_safe(name): name for name in benches}
    out: dict[str, BenchmarkReport] = {}
    for stem in rundir.benchmarks():
        name = by_file.get(stem, stem)
        path = rundir.path / f"{stem}.jsonl"
        bench = load_benchmark(path, name, config, failed=failed, configurations=configurations)
        bench.stderr, bench.stderr_method = standard_error(bench, n_boot=bootstrap, seed=seed)
        out[name] = bench
    if not out:
        raise DataError(f"{rundir.path}: the run has no results yet (no <benchmark>.jsonl)")
    return RunReport(rundir.path, rundir.path.name, config, out, failed)


def load_benchmark(
    path: Path,
    name: str,
    config: dict[str, Any],
    *,
    failed: FailedPolicy = "zero",
    configurations: list[dict[str, Any]] | None = None,
) -> BenchmarkReport:
    """One benchmark's store, aggregated by its spec's official rule.

    Only valid records made under one of ``configurations`` (config.json and its
    amendments; default: the run's) count; the others are named in the notes.
    """
    configurations = configurations or RunDir(path.parent).configurations()
    records, problems = check_records(path)
    records, foreign = split_foreign(records, configurations)
    scored, counts = scored_from_records(records, failed=failed)
    counts.malformed, counts.foreign = len(problems), len(foreign)
    entry = ((config.get("result_config") or {}).get("benchmarks") or {}).get(name) or {}
    data = recorded_data_spec(config, name)  # a --data file's rows: the spec they ran under
    spec, variant, notes = (data[0], None, [data[2]]) if data else resolve_spec(name, config, entry)
    notes += problem_notes(RunDir(path.parent).problems(name), counts)
    notes += rejected_notes(problems, foreign) + provenance_note(name, records, configurations)
    notes += judge_notes(records)
    result = aggregate_scored(spec, scored, path)
    if spec is None:
        official, label = False, ADHOC_AGGREGATION
    elif data and not data[1]:
        official, label = (
            False,
            f"pooled mean ({spec.name}'s official rule needs fields the rows lack)",
        )
    else:
        official, label = True, spec.aggregation.name
    notes += _count_notes(counts, failed)

    def official_of(recs: list[dict[str, Any]]) -> float | None:  # the same path, other verdicts
        return aggregate_scored(spec, scored_from_records(recs, failed=failed)[0], path).overall

    breakdown_fields = list(result.breakdowns) or (["task_type"] if spec is None else [])
    return BenchmarkReport(
        name=name,
        path=path,
        records=records,
        scored=scored,
        result=result,
        counts=counts,
        aggregation=label,
        official=official,
        spec=spec,
        variant=variant,
        settings=_settings(config, entry),
        group_sizes={f: _group_sizes(scored, f) for f in breakdown_fields},
        notes=notes,
        sensitivity=sensitivity(records, result.overall, official_of),
    )


def _count_notes(counts: Any, failed: FailedPolicy) -> list[str]:
    """What the failed, scorer-failed and unscored samples do to the aggregate."""
    notes = []
    others = counts.failed - len(counts.scorer_failed)
    if others and failed == "zero":
        notes.append(f"{others} failed sample(s) count as wrong (0) in the aggregate")
    elif others:
        notes.append(f"{others} failed sample(s) are left out of the aggregate")
    if counts.scorer_failed:
        notes.append(scorer_failed_note(counts))
    if counts.unscored:
        notes.append(f"{counts.unscored} sample(s) could not be scored (not counted as 0)")
    return notes


def aggregate_scored(spec: Any, scored: list[Scored], path: Path) -> AggregateResult:
    """The official aggregate by ``spec`` (None: an ad-hoc file's pooled mean by task type)."""
    if spec is None:
        return _adhoc(scored)
    try:
        return aggregate(spec, scored)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(
            f"{path}: the records cannot be aggregated by {spec.name}'s official rule "
            f"({spec.aggregation.name}: {type(exc).__name__}: {exc}); the records lack a "
            "field the rule needs (written by an older evalkit?) — rerun the benchmark"
        ) from None


def scorer_failed_note(counts: Counts, shown: int = 10) -> str:
    """The samples whose scorer raised: how many, which (ids), and what to do."""
    ids = list(counts.scorer_failed)
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return (
        f"scorer failed on {len(ids)} sample(s) ({', '.join(ids[:shown])}{more}): a bug in "
        "the scorer, not the model's answer; left out of the aggregate, never counted as 0 "
        "(tracebacks in the records; fix the scorer, then evalkit run --retry-failed)"
    )


def problem_notes(problems: list[dict[str, Any]], counts: Counts) -> list[str]:
    """Notes on the rows that did not load (counted in ``counts.invalid``) or loaded repaired."""
    counts.invalid = sum(p.get("level") != "warning" for p in problems)
    repaired = len(problems) - counts.invalid
    notes = []
    if counts.invalid:
        notes.append(f"{counts.invalid} invalid row(s) not loaded (listed in invalid/)")
    if repaired:
        notes.append(f"{repaired} row(s) loaded with a repaired (suffixed) duplicate id")
    return notes


def read_records(path: Path) -> list[dict[str, Any]]:
    """The latest valid record per sample id, read-only (a run may still be writing the file).

    Unlike opening a ``Store``, this never truncates a torn last line: it only skips it.
    Lines that are not valid records are skipped too (``check_records`` names them).
    """
    return check_records(path)[0]


def scored_from_records(
    records: list[dict[str, Any]], *, failed: FailedPolicy = "zero"
) -> tuple[list[Scored], Counts]:
    """Samples rebuilt from store records, with their values, and the outcome counts."""
    out: list[Scored] = []
    counts = Counts(total=len(records))
    for rec in records:
        sample = Sample(
            id=str(rec["id"]),
            task_type=str(rec.get("task_type") or "unknown"),
            question="",
            target=rec.get("target"),
            benchmark=str(rec.get("benchmark") or ""),
            fields=dict(rec.get("fields") or {}),
        )
        score = rec.get("score") or {}
        if rec.get("status") == "failed":
            counts.failed += 1
            stage = str(rec.get("stage") or "unknown")
            counts.failed_by_stage[stage] = counts.failed_by_stage.get(stage, 0) + 1
            if stage == "score":
                counts.scorer_failed[sample.id] = str(rec.get("error") or "")
                continue
            if failed == "exclude":
                continue
            value: float | None = 0.0
        else:
            raw = score.get("value")
            value = None if raw is None else float(raw)
            if value is None:
                counts.unscored += 1
            else:
                counts.scored += 1
        out.append(_scored(sample, value, score.get("metadata") or {}))
    return out, counts


def _scored(sample: Sample, value: float | None, metadata: dict[str, Any]) -> Scored:
    # Scored gains a metadata field for IoU-style aggregations; older versions lack it.
    if _SCORED_HAS_METADATA:
        return Scored(sample, value, dict(metadata))  # type: ignore[call-arg,unused-ignore]
    return Scored(sample, value)


def resolve_spec(
    name: str, config: dict[str, Any], entry: dict[str, Any]
) -> tuple[Any, str | None, list[str]]:
    """The registry spec a benchmark ran under, its variant, and notes on how it was found.

    The variant is the one whose spec hash equals the hash recorded in ``config.json``;
    when none does (the YAML changed since the run, e.g. a reference score was added),
    it is read from the run's ``--bench NAME:VARIANT`` list.
    """
    from evalkit.bench.registry import get_benchmark
    from evalkit.registry import RegistryError

    if entry and entry.get("spec_hash") is None:
        return None, None, []
    try:
        base = get_benchmark(name)
    except RegistryError:
        return None, None, [f"no spec named {name!r} in the registry: pooled mean, not official"]
    recorded = entry.get("spec_hash")
    for variant in [None, *sorted(base.variants)]:
        spec = base.with_variant(variant)
        if recorded and hash_json(spec.model_dump(mode="json")) == recorded:
            return spec, variant, []
    variant = _variant_from_bench_list(base, config)
    notes = []
    if recorded:
        notes.append(
            f"{name}'s spec changed since the run (hash {recorded} no longer matches); "
            "aggregated with the current spec"
        )
    return base.with_variant(variant), variant, notes


def _variant_from_bench_list(base: Any, config: dict[str, Any]) -> str | None:
    from evalkit.bench.spec import normalize_name

    keys = {normalize_name(n) for n in [base.name, *base.aliases]}
    for item in (config.get("extra") or {}).get("bench") or []:
        head, _, variant = str(item).partition(":")
        if variant and normalize_name(head) in keys and variant in base.variants:
            return variant
    return None


def _adhoc(scored: list[Scored]) -> AggregateResult:
    tagged = [
        dataclasses.replace(
            s,
            sample=s.sample.model_copy(
                update={"fields": {**s.sample.fields, "task_type": s.sample.task_type}}
            ),
        )
        for s in scored
    ]
    return AGGREGATIONS.get("mean")(tagged, ["task_type"])


def _group_sizes(scored: list[Scored], name: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for s in scored:
        if s.value is None:
            continue  # the count behind a group's percentage: unscored samples are not in it
        v = s.sample.task_type if name == "task_type" else s.sample.fields.get(name)
        if v is None:
            continue
        for g in v if isinstance(v, list | tuple) else [v]:
            sizes[str(g)] = sizes.get(str(g), 0) + 1
    return dict(sorted(sizes.items()))


def _settings(config: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    rc = config.get("result_config") or {}
    return {
        "model": rc.get("model"),
        "engine": rc.get("engine"),
        # the variant a benchmark ran in (runs before per-benchmark variants: the run's)
        "prompt_variant": entry.get("variant", rc.get("variant")),
        "max_tokens": entry.get("max_tokens"),
        "frames": entry.get("frames") or {},
        "engine_options": rc.get("engine_options") or {},
    }


def _safe(name: str) -> str:
    # The same file-name rule as RunDir.store.
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
