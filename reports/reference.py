"""Published reference scores: which apply to a run, how far it is, and what differed.

Matching rule (stated in every report): a spec's reference applies to a run when
1. its ``model`` equals the run's model name, comparing normalised names (lower case,
   letters and digits only, so ``Qwen2.5-VL-7B-Instruct`` = ``qwen2_5-vl-7b-instruct``).
   The run's model name is the last path component of the model given to ``evalkit run``
   (``/ckpt/Qwen2.5-VL-7B-Instruct`` or ``Qwen/Qwen2.5-VL-7B-Instruct``), plus, for a local
   checkpoint, the last component of ``_name_or_path`` in its ``config.json``; ``--model-name``
   replaces both. No fuzzy matching: a fine-tuned or quantised checkpoint is another model.
2. its ``variant`` equals the spec variant the run used (None = the base spec).
Settings are then compared with the spec's pinned ones (frames, prompt variant, generation
cap), which are the settings the references were produced with; the reference's own
``settings`` text is shown next to the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.bench.aggregations import AggregateResult
from evalkit.prompts import PromptPlan
from evalkit.registry import normalize_name

from .model import ReferenceCheck

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec, ReferenceScore
    from evalkit.manifest import DataProvenance

    from .model import BenchmarkReport, RunReport

MATCH_RULE = (
    "reference model == run model name (normalised: lower case, letters+digits; name = last "
    "path component of --model or --model-name) and reference variant == run's spec variant"
)
# factor is the model's patch grid, chosen by the model family, not a sampling setting.
_FRAME_KEYS = (
    "fps",
    "nframes",
    "min_frames",
    "max_frames",
    "min_pixels",
    "max_pixels",
    "total_pixels",
    "temporal_patch",
)


def model_names(model: str, override: str | None = None) -> list[str]:
    """Names a run's model is known by, for matching against reference entries."""
    if override:
        return [override]
    path = model.rstrip("/\\")
    names = [Path(path).name or path]
    cfg = Path(path) / "config.json"
    if cfg.is_file():
        try:
            hint = json.loads(cfg.read_text()).get("_name_or_path")
        except (ValueError, OSError):
            hint = None
        if hint:
            names.append(Path(str(hint).rstrip("/")).name)
    return list(dict.fromkeys(n for n in names if n))


def matching_references(
    spec: BenchmarkSpec, variant: str | None, names: list[str]
) -> list[ReferenceScore]:
    """The spec's reference entries for this model and spec variant."""
    keys = {normalize_name(n) for n in names}
    return [
        r
        for r in spec.references
        if normalize_name(r.model) in keys and (r.variant or None) == (variant or None)
    ]


def metric_value(result: AggregateResult, metric: str) -> float | None:
    """``overall``, ``<field>/<group>`` from the breakdowns, or a named extra metric."""
    if metric == "overall":
        return result.overall
    fld, sep, group = metric.partition("/")
    if sep:
        return result.breakdowns.get(fld, {}).get(group)
    return result.metrics.get(metric)


def settings_diff(spec: BenchmarkSpec, settings: dict[str, Any]) -> list[str]:
    """The run's settings that differ from the spec's pinned (reference) settings."""
    out = []
    frames = settings.get("frames") or {}
    pinned = spec.frames.model_dump(mode="json")
    for key in _FRAME_KEYS:
        if key in frames and frames[key] != pinned.get(key):
            out.append(f"{key} {frames[key]} (reference {pinned.get(key)})")
    if settings.get("engine") == "external":  # evalkit score: frames, cap were not ours
        out.append("frames and max_tokens unknown (predictions made elsewhere)")
    variant = settings.get("prompt_variant")
    if variant and variant != spec.prompt.variant:
        out.append(f"prompt variant {variant} (reference {spec.prompt.variant})")
    gen = spec.generation
    thinking = PromptPlan.for_spec(spec, variant or None).thinking(spec.task_types)
    cap = gen.max_tokens_thinking if thinking else gen.max_tokens
    if settings.get("max_tokens") not in (None, cap):
        out.append(f"max_tokens {settings['max_tokens']} (reference {cap})")
    return out


def check_references(
    bench: BenchmarkReport, names: list[str], tolerance: float
) -> list[ReferenceCheck]:
    """Every applicable reference of a benchmark report, with delta and settings diff."""
    if bench.spec is None:
        return []
    diff = settings_diff(bench.spec, bench.settings)
    out = []
    for ref in matching_references(bench.spec, bench.variant, names):
        value = metric_value(bench.result, ref.metric)
        data = data_diff(ref, bench.settings.get("data"))
        out.append(
            ReferenceCheck(
                benchmark=bench.name,
                model=ref.model,
                metric=ref.metric,
                reference=ref.value,
                value=value,
                delta=None if value is None else value - ref.value,
                tolerance=tolerance,
                variant=ref.variant,
                settings_text=ref.settings,
                source=ref.source,
                settings_diff=diff + data,
            )
        )
    return out


def data_diff(ref: ReferenceScore, data: DataProvenance | None) -> list[str]:
    """The data commit a run read, where it is not the one its reference was measured on
    (when the reference records one)."""
    if ref.data_commit is None:
        return []
    read = data.commit if data is not None else None
    if read is not None and read.startswith(ref.data_commit):
        return []
    said = f"{read[:12]}" if read else "a copy not fetched from the Hub (commit unknown)"
    return [f"data commit {said} (reference {ref.data_commit[:12]})"]


@dataclass
class Verdict:
    """The reproduction verdict of one benchmark."""

    benchmark: str
    status: str
    """match, miss, no score, or no reference."""
    checks: list[ReferenceCheck]
    message: str
    stderr: float | None = None
    samples_run: int | None = None
    """Samples the run holds for the benchmark."""
    samples_in_benchmark: int | None = None
    """Samples the benchmark's data held (None: not recorded by the run)."""

    @property
    def partial(self) -> bool:
        """The run covered a slice of the benchmark."""
        n, of = self.samples_run, self.samples_in_benchmark
        return n is not None and of is not None and n < of

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "benchmark": self.benchmark,
            "status": self.status,
            "message": self.message,
            "stderr": self.stderr,
            "samples_run": self.samples_run,
            "samples_in_benchmark": self.samples_in_benchmark,
            "partial": self.partial,
            "checks": [c.to_dict() for c in self.checks],
        }


def verdicts(run: RunReport, tolerance: float, model_name: str | None = None) -> list[Verdict]:
    """Check every benchmark of a loaded run against its matching references."""
    names = model_names(run.model, model_name)
    out = []
    for bench in run.benchmarks.values():
        checks = check_references(bench, names, tolerance)
        bench.references = checks
        verdict = _verdict(bench, checks, names)
        verdict.samples_run = bench.counts.total
        verdict.samples_in_benchmark = bench.counts.available
        out.append(verdict)
    return out


def _verdict(bench: BenchmarkReport, checks: list[ReferenceCheck], names: list[str]) -> Verdict:
    if not checks:
        return Verdict(bench.name, "no reference", [], _why_none(bench, names), bench.stderr)
    bad = [c for c in checks if c.verdict != "match"]
    if not bad:
        worst = max(checks, key=lambda c: abs(c.delta or 0.0))
        msg = f"{bench.name}: within {worst.tolerance:g} points (worst {_fmt_check(worst)})"
        return Verdict(bench.name, "match", checks, msg, bench.stderr)
    parts = []
    for c in bad:
        if c.value is None:
            parts.append(f"{c.metric}: no score (nothing could be scored) vs {c.reference:g}")
        else:
            parts.append(f"{_fmt_check(c)}, |delta| > tolerance {c.tolerance:g}")
    diff = checks[0].settings_diff
    settings = (
        f"; settings that differ from the reference's: {', '.join(diff)}"
        if diff
        else "; settings match the spec's pinned ones"
    )
    if bench.counts.failed:
        settings += f"; {bench.counts.failed} failed sample(s) counted as wrong"
    if bench.stderr is not None:
        # A run over a subset (--limit) can miss by noise alone; say how large that is.
        settings += f"; {bench.counts.total} samples, standard error {bench.stderr:.2f}"
    status = "miss" if any(c.verdict == "miss" for c in bad) else "no score"
    msg = f"{bench.name} ({checks[0].model}): " + "; ".join(parts) + settings
    return Verdict(bench.name, status, checks, msg, bench.stderr)


def _fmt_check(c: ReferenceCheck) -> str:
    return f"{c.metric} {c.value:.2f} vs reference {c.reference:g}: delta {c.delta:+.2f}"


def _why_none(bench: BenchmarkReport, names: list[str]) -> str:
    if bench.spec is None:
        return f"{bench.name}: no spec, so no reference scores ({bench.aggregation})"
    keys = {normalize_name(n) for n in names}
    for_model = [r for r in bench.spec.references if normalize_name(r.model) in keys]
    if for_model:
        variants = sorted({r.variant or "base" for r in for_model})
        return (
            f"{bench.name}: references for {for_model[0].model} exist only for variant(s) "
            f"{', '.join(variants)}; this run used {bench.variant or 'base'}"
        )
    known = sorted({r.model for r in bench.spec.references})
    return (
        f"{bench.name}: no reference for model {' / '.join(names)} "
        f"(references: {', '.join(known) or 'none'}; pass --model-name to name the model)"
    )
