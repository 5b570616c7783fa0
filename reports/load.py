"""A run directory -> per-benchmark official aggregates, counts, settings and timings.

Everything here is read from the run directory alone (its manifest, ``config.json``, + one
JSONL store per benchmark): records carry the sample's task type, target and breakdown
fields, so no dataset is needed. The official rule comes from the benchmark's spec as run
(recorded in the manifest; the live registry only for runs that recorded none, said so in
the report, see ``reports.specs``); a benchmark without a spec (an ad-hoc ``--data`` file)
gets a pooled mean broken down by task type, labelled as such.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from evalkit.bench.aggregations import AGGREGATIONS, AggregateResult, Scored, aggregate
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import DataError
from evalkit.manifest import BenchmarkSettings, RunManifest
from evalkit.records import SampleRecord, ScoreRecord
from evalkit.rundir import RunDir, store_stems
from evalkit.sample import Sample

from .judging import judge_notes
from .model import BenchmarkReport, Counts, FailedPolicy, RunReport
from .provenance import check_records, provenance_note, rejected_notes, split_foreign
from .sensitivity import Sensitivity, sensitivity
from .specs import SpecAsRun, recorded_data_spec, spec_as_run
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
    manifest = rundir.manifest()
    configurations = rundir.configurations()
    by_file = {s: name for name in manifest.result_config.benchmarks for s in store_stems(name)}
    out: dict[str, BenchmarkReport] = {}
    for stem in rundir.benchmarks():
        name = by_file.get(stem, stem)
        path = rundir.store_path(stem)
        bench = load_benchmark(path, name, manifest, failed=failed, configurations=configurations)
        bench.stderr, bench.stderr_method = standard_error(bench, n_boot=bootstrap, seed=seed)
        out[name] = bench
    if not out:
        raise DataError(f"{rundir.path}: the run has no results yet (no <benchmark>.jsonl)")
    live = [name for name, b in out.items() if b.live_spec]
    return RunReport(rundir.path, rundir.path.name, manifest, out, failed, live_specs=live)


def load_benchmark(
    path: Path,
    name: str,
    manifest: RunManifest,
    *,
    failed: FailedPolicy = "zero",
    configurations: list[dict[str, Any]] | None = None,
) -> BenchmarkReport:
    """One benchmark's store, aggregated by the official rule of its spec as run.

    Only valid records made under one of ``configurations`` (config.json and its
    amendments; default: the run's) count; the others are named in the notes.
    """
    configurations = configurations or RunDir(path.parent).configurations()
    records, problems = check_records(path)
    records, foreign = split_foreign(records, configurations)
    scored, counts = scored_from_records(records, failed=failed)
    counts.malformed, counts.foreign = len(problems), len(foreign)
    counts.available = manifest.benchmark_samples.get(name)
    as_run, official, label = _as_run(name, manifest)
    spec, notes = as_run.spec, list(as_run.notes)
    notes += problem_notes(RunDir(path.parent).problems(name), counts)
    notes += rejected_notes(problems, foreign) + provenance_note(name, records, configurations)
    notes += judge_notes(records)
    result = aggregate_scored(spec, scored, path)
    notes += _count_notes(counts, failed)
    if counts.partial:
        notes.append(partial_note(counts))

    def official_of(recs: list[SampleRecord]) -> float | None:  # the same path, other verdicts
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
        variant=as_run.variant,
        settings=_settings(manifest, name),
        group_sizes={f: _group_sizes(scored, f) for f in breakdown_fields},
        notes=notes,
        sensitivity=(sens := sensitivity(records, result.overall, official_of)),
        live_spec=as_run.live,
        headline_plugin=headline_plugin(manifest, sens),
    )


def headline_plugin(manifest: RunManifest, sens: Sensitivity | None) -> str | None:
    """Which plug-in the headline verdicts come from (None: evalkit's own rules): a rule
    a plug-in registered, or ``evalkit``'s reading of a task type a plug-in added."""
    if sens is None or not manifest.plugins:
        return None
    from evalkit.scoring.rules import EVALKIT, rule_key

    said = []
    for task_type, rule in sens.headline_rules.items():
        kind, name = ("extraction rule", rule_key(rule, task_type))
        if rule == EVALKIT:  # evalkit's reading is the task type's own scorer
            kind, name = "task type", task_type
        said += [
            f"headline rule {rule} comes from {p.describe()}"
            for p in manifest.plugins
            if p.provides(kind, name)
        ]
    return "; ".join(dict.fromkeys(said)) or None


def _as_run(name: str, manifest: RunManifest) -> tuple[SpecAsRun, bool, str]:
    """The spec a benchmark is aggregated by, whether that is official, and its label."""
    data = recorded_data_spec(manifest, name)  # a --data file's rows: the spec they ran under
    if data is not None:
        spec, official, note = data
        as_run = SpecAsRun(spec, None, [note])
        if spec is not None and not official:
            return (
                as_run,
                False,
                f"pooled mean ({spec.name}'s official rule needs fields the rows lack)",
            )
    else:
        as_run = spec_as_run(name, manifest)
    if as_run.spec is None:
        return as_run, False, ADHOC_AGGREGATION
    return as_run, True, as_run.spec.aggregation.name


def _count_notes(counts: Counts, failed: FailedPolicy) -> list[str]:
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


def partial_note(counts: Counts) -> str:
    """A run over a slice of the benchmark, said with its size."""
    return (
        f"partial run: {counts.total} of the benchmark's {counts.available} samples (--limit "
        "or an unfinished run); the score is over that slice, not the whole benchmark"
    )


def aggregate_scored(
    spec: BenchmarkSpec | None, scored: list[Scored], path: Path
) -> AggregateResult:
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


def read_records(path: Path) -> list[SampleRecord]:
    """The latest valid record per sample id, read-only (a run may still be writing the file).

    Unlike opening a ``Store``, this never truncates a torn last line: it only skips it.
    Lines that are not valid records are skipped too (``check_records`` names them).
    """
    return check_records(path)[0]


def scored_from_records(
    records: list[SampleRecord], *, failed: FailedPolicy = "zero"
) -> tuple[list[Scored], Counts]:
    """Samples rebuilt from store records, with their values, and the outcome counts."""
    out: list[Scored] = []
    counts = Counts(total=len(records))
    for rec in records:
        sample = Sample(
            id=rec.id,
            task_type=rec.task_type or "unknown",
            question="",
            target=rec.target,
            benchmark=rec.benchmark,
            fields=dict(rec.fields),
        )
        score = rec.score or ScoreRecord()
        if rec.status == "failed":
            counts.failed += 1
            stage = rec.stage or "unknown"
            counts.failed_by_stage[stage] = counts.failed_by_stage.get(stage, 0) + 1
            if stage == "score":
                counts.scorer_failed[sample.id] = rec.error or ""
                continue
            if failed == "exclude":
                continue
            value: float | None = 0.0
        else:
            value = None if score.value is None else float(score.value)
            if value is None:
                counts.unscored += 1
            else:
                counts.scored += 1
        out.append(_scored(sample, value, score.metadata))
    return out, counts


def _scored(sample: Sample, value: float | None, metadata: dict[str, Any]) -> Scored:
    # Scored gains a metadata field for IoU-style aggregations; older versions lack it.
    if _SCORED_HAS_METADATA:
        return Scored(sample, value, dict(metadata))  # type: ignore[call-arg,unused-ignore]
    return Scored(sample, value)


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


def _settings(manifest: RunManifest, name: str) -> dict[str, Any]:
    rc = manifest.result_config
    entry = rc.benchmarks.get(name) or BenchmarkSettings()
    # the variant a benchmark ran in (runs before per-benchmark variants: the run's)
    own = "variant" in entry.model_fields_set
    return {
        "model": rc.model,
        "engine": rc.engine,
        "prompt_variant": entry.variant if own else rc.variant,
        "prompt": entry.prompt,
        "max_tokens": entry.max_tokens,
        "frames": entry.frames or {},
        "engine_options": rc.engine_options or {},
        "data": manifest.data.get(name),
    }
