"""Which spec a benchmark of a run is aggregated by: the one it ran under, as recorded.

The run's manifest (``config.json``) records each benchmark's spec as run, so a YAML
edited since (another aggregate, another headline rule, another prompt) does not change
an old run's number. Only a run that recorded no spec (written before the manifest kept
specs), or whose recorded spec this evalkit cannot read, falls back to the live registry,
matched by the recorded spec hash; the report then names the benchmark as aggregated by
the live registry's spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evalkit.bench.spec import BenchmarkSpec
from evalkit.manifest import RunManifest, hash_json


@dataclass
class SpecAsRun:
    """The spec a benchmark is aggregated by (None: ad-hoc data) and how it was found."""

    spec: BenchmarkSpec | None
    variant: str | None = None
    notes: list[str] = field(default_factory=list)
    live: bool = False
    """Taken from the live registry (the run recorded no usable spec): said in the report."""


def spec_as_run(name: str, manifest: RunManifest) -> SpecAsRun:
    """The recorded spec of ``name``, else the live registry's (``live``), else None."""
    entry = manifest.result_config.benchmarks.get(name)
    if entry is not None and entry.spec_hash is None:
        return SpecAsRun(None)  # ad-hoc data recorded without a spec (older runs)
    notes = []
    try:
        recorded = manifest.recorded_spec(name)
    except ValueError as exc:
        recorded = None
        notes.append(f"{exc}: aggregated by the live registry's spec")
    if recorded is not None:
        return SpecAsRun(with_live_references(recorded), recorded.variant)
    bench_list = [str(b) for b in manifest.extra.get("bench") or []]
    spec, variant, more = live_spec(name, bench_list, entry.spec_hash if entry else None)
    return SpecAsRun(spec, variant, notes + more, live=spec is not None)


def with_live_references(recorded: BenchmarkSpec) -> BenchmarkSpec:
    """``recorded`` with the live registry's reference scores and YAML location.

    Reference scores are published numbers, not settings of the run: one added or
    corrected since still applies to it. The YAML's location finds adapter hooks.
    """
    from evalkit.bench.registry import get_benchmark
    from evalkit.registry import RegistryError

    try:
        live = get_benchmark(recorded.name).with_variant(recorded.variant)
    except (RegistryError, KeyError):
        return recorded
    out = recorded.model_copy(update={"references": live.references})
    return out.located(live.source_path) if live.source_path else out


def live_spec(
    name: str, bench_list: list[str], recorded_hash: str | None
) -> tuple[BenchmarkSpec | None, str | None, list[str]]:
    """The registry spec a benchmark ran under, its variant, and notes on how it was found.

    The variant is the one whose spec hash equals ``recorded_hash``; when none does (the
    YAML changed since the run), it is read from the run's ``--bench NAME:VARIANT`` list.
    """
    from evalkit.bench.registry import get_benchmark, registry
    from evalkit.registry import RegistryError

    try:  # a run names a variant NAME:VARIANT: its variants are tried from the base
        base = get_benchmark(registry().resolve(name)[0])
    except RegistryError:
        return None, None, [f"no spec named {name!r} in the registry: pooled mean, not official"]
    for variant in [None, *sorted(base.variants)]:
        spec = base.with_variant(variant)
        if recorded_hash and hash_json(spec.recorded()) == recorded_hash:
            return spec, variant, []
    variant = _variant_from_bench_list(base, bench_list)
    notes = []
    if recorded_hash:
        notes.append(
            f"{name}'s spec changed since the run (hash {recorded_hash} no longer matches); "
            "aggregated with the current spec"
        )
    return base.with_variant(variant), variant, notes


def _variant_from_bench_list(base: BenchmarkSpec, bench_list: list[str]) -> str | None:
    from evalkit.bench.registry import registry
    from evalkit.registry import RegistryError

    for item in bench_list:
        try:  # the registry's own reading: NAME:VARIANT, or an alias standing for a variant
            name, variant = registry().resolve(item)
        except RegistryError:
            continue
        if variant and name == base.name and variant in base.variants:
            return variant
    return None


def live_note(names: list[str]) -> str:
    """The report's line naming the benchmarks aggregated by the live registry's spec."""
    return (
        f"aggregated by the live registry's spec, not the spec as run (the run recorded "
        f"none this evalkit can read): {', '.join(names)}"
    )


def recorded_data_spec(
    manifest: RunManifest, name: str
) -> tuple[BenchmarkSpec | None, bool, str] | None:
    """For a run benchmark made from a ``--data`` file: the spec it ran under (None for
    rows of no known benchmark), whether its aggregate is official, and the note saying
    how its rows were matched. None when ``name`` is not a ``--data`` benchmark. (A reader
    of the run record: it lives with the reports, not in evalkit.bench below the records.)"""
    info = manifest.data_benchmarks.get(name)
    if info is None:
        return None
    raw = manifest.specs.get(name)
    if not info.get("benchmark") or raw is None:
        return None, False, str(info.get("note") or "")
    return BenchmarkSpec.model_validate(raw), bool(info.get("official")), str(info.get("note"))
