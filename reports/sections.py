"""The content of a report as titled tables of plain strings, shared by every output format.

Terminal, Markdown and HTML render the same sections, so the numbers cannot disagree
between formats; JSON is built from the same objects (see ``reports.render.to_json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.rundir import config_diff
from evalkit.startup import StartupTimes

from .reference import MATCH_RULE
from .specs import live_note
from .timeline import Utilisation, spans, utilisation

if TYPE_CHECKING:
    from evalkit.records import RuleVerdict

    from .model import BenchmarkReport, RunReport
    from .sensitivity import Example, RuleGap
    from .uncertainty import Comparison


@dataclass
class Section:
    """A titled table, with notes printed under it."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    level: int = 3
    figures: list[tuple[str, Path]] = field(default_factory=list)
    """(caption, PNG path) shown under the section in Markdown and HTML."""


def num(v: float | None, digits: int = 2) -> str:
    """A number for people (``-`` for missing)."""
    return "-" if v is None else f"{v:.{digits}f}"


def _score(b: BenchmarkReport) -> str:
    if b.overall is None:
        return "unscored"
    return f"{b.overall:.2f} ± {b.stderr:.2f}" if b.stderr is not None else f"{b.overall:.2f}"


def _ref_cell(b: BenchmarkReport) -> tuple[str, str, str]:
    refs = [r for r in b.references if r.metric == "overall"] or b.references
    if not refs:
        return "-", "-", "no reference"
    r = refs[0]
    return f"{r.reference:g} ({r.model})", num(r.delta), r.verdict


def _labelled(name: str, variant: str | None) -> str:
    """``Video-MME:with_subtitles``; a store already named for its variant (``evalkit score``
    writes one per variant: ``TempCompass:yes_no``) is not named twice."""
    if not variant or name.endswith(f":{variant}"):
        return name
    return f"{name}:{variant}"


def summary(run: RunReport) -> Section:
    """One row per benchmark: official number, error, counts, reference delta."""
    rows = []
    for b in run.benchmarks.values():
        c = b.counts
        ref, delta, verdict = _ref_cell(b)
        rows.append(
            [
                _labelled(b.name, b.variant),
                _score(b) + (" (plug-in rule)" if b.headline_plugin else ""),
                b.aggregation + ("" if b.official else " (NOT official)"),
                str(c.total),
                str(c.scored),
                str(c.failed),
                str(c.unscored),
                ref,
                delta,
                verdict,
            ]
        )
    notes = [live_note(run.live_specs)] if run.live_specs else []
    notes += [f"{b.name}: {n}" for b in run.benchmarks.values() for n in b.notes]
    notes += [
        f"{b.name}: headline extraction rule {headline_rules(b)}"
        for b in run.benchmarks.values()
        if b.sensitivity is not None
    ]
    notes += [
        f"{b.name}: {b.headline_plugin}, not a rule evalkit ships"
        for b in run.benchmarks.values()
        if b.headline_plugin
    ]
    notes += [
        f"{b.name}: {b.sensitivity.gap.sentence()} (examples under its extraction sensitivity)"
        for b in run.benchmarks.values()
        if b.sensitivity is not None and b.sensitivity.gap is not None
    ]
    notes += frame_notes(run)
    notes += data_notes(run)
    notes.append(_policy_note(run))
    notes.append(f"reference matching: {MATCH_RULE}")
    headers = [
        "benchmark",
        "score",
        "aggregation",
        "n",
        "scored",
        "failed",
        "unscored",
        "reference",
        "delta",
        "verdict",
    ]
    return Section(f"Run {run.run_id} — {run.model}", headers, rows, notes, level=2)


def scorer_failures(run: RunReport) -> list[Section]:
    """Every sample whose scorer raised, by benchmark (no section when none did)."""
    rows = [
        [b.name, sample_id, error]
        for b in run.benchmarks.values()
        for sample_id, error in b.counts.scorer_failed.items()
    ]
    if not rows:
        return []
    per = ", ".join(
        f"{b.name} {len(b.counts.scorer_failed)}"
        for b in run.benchmarks.values()
        if b.counts.scorer_failed
    )
    notes = [
        f"scorer failed on {len(rows)} sample(s) ({per}): the scorer raised, a bug on "
        "evalkit's side, not the model's answer",
        "left out of the aggregate whatever the failed policy, never counted as 0; each "
        "record holds the traceback (field traceback); fix the scorer, then rerun with "
        "evalkit run --retry-failed",
    ]
    return [Section(f"Scorer failed — {run.run_id}", ["benchmark", "sample", "error"], rows, notes)]


def _policy_note(run: RunReport) -> str:
    policy = "count as wrong (0)" if run.failed_policy == "zero" else "are left out"
    if any(b.counts.scorer_failed for b in run.benchmarks.values()):
        policy += " (scorer failures are always left out)"
    return (
        "score = official aggregate in percent ± standard error (points); failed samples "
        f"{policy}; unscored samples are never counted as 0"
    )


def combined(runs: list[RunReport]) -> list[Section]:
    """Headlines a spec defines across its variants (TempCompass's avg_all), per model,
    when the runs hold each variant it combines exactly once; none otherwise."""
    from evalkit.bench.aggregations.variants import combined_headlines

    by_model: dict[str, list[BenchmarkReport]] = {}
    for run in runs:
        by_model.setdefault(run.model, []).extend(run.benchmarks.values())
    rows = []
    for model, benches in by_model.items():
        for name, res in combined_headlines(benches).items():
            parts = ", ".join(f"{v} {num(x)}" for v, x in res.breakdowns["variant"].items())
            rows.append([name, model, num(res.overall), str(res.n), str(res.n_scored), parts])
    if not rows:
        return []
    headers = ["headline", "model", "score", "n", "scored", "variants"]
    note = "combined from the variants' runs as the spec's aggregation.across_variants says"
    return [Section("Headlines across variants", headers, rows, [note], level=2)]


def breakdowns(b: BenchmarkReport) -> list[Section]:
    """Per-group values of each breakdown field of the official aggregate."""
    out = []
    for fld, groups in b.result.breakdowns.items():
        sizes = b.group_sizes.get(fld, {})
        rows = [[g, num(v), str(sizes.get(g, "-"))] for g, v in groups.items()]
        out.append(Section(f"{b.name}: by {fld}", [fld, "score", "samples"], rows, level=4))
    if b.result.metrics:
        rows = [[k, num(v)] for k, v in b.result.metrics.items()]
        out.append(Section(f"{b.name}: other official metrics", ["metric", "value"], rows, level=4))
    return out


def headline_rules(b: BenchmarkReport) -> str:
    """``videomme`` or ``multiple_choice: videomme, numerical: evalkit``."""
    rules = b.sensitivity.headline_rules if b.sensitivity else {}
    if len(set(rules.values())) == 1:
        return next(iter(rules.values()))
    return ", ".join(f"{t}: {r}" for t, r in rules.items())


def extraction(b: BenchmarkReport) -> list[Section]:
    """The official number under each extraction rule, flips, and replies that flip."""
    sens = b.sensitivity
    if sens is None:
        return []
    rows = [
        [
            r.rule,
            "headline" if r.headline else "",
            num(r.overall),
            "" if r.headline else num(r.delta),
            "" if r.headline else str(r.changed),
            "" if r.headline else f"{r.up} / {r.down}",
            str(r.compared),
            "" if r.headline else str(r.errors),
            r.source or "-",
        ]
        for r in sens.rows
    ]
    headers = [
        "rule",
        "role",
        "score",
        "delta",
        "flips",
        "up / down",
        "samples",
        "errors",
        "source",
    ]
    notes = [
        f"headline rule: {headline_rules(b)}",
        f"score = the official aggregate ({b.aggregation}) with every sample's verdict taken "
        "under the rule; samples of a task type without that rule keep their headline verdict",
        "flips = samples whose verdict differs from the headline rule's (up = the rule "
        "scores them higher); errors = samples on which the rule raised",
    ]
    if len(sens.rows) == 1:
        notes.append("no other extraction rule is registered for this benchmark's task types")
    notes += [rule_failed_note(b, r.rule) for r in sens.rows if r.errors and not r.headline]
    out = [Section(f"{b.name}: extraction sensitivity", headers, rows, notes, level=4)]
    out += rule_gap(b.name, sens.gap)
    if sens.examples:
        names = list(sens.examples[0].verdicts)
        ex_rows = [[e.id, e.reply, *(e.verdicts[n] for n in names)] for e in sens.examples]
        ex_headers = ["sample", "reply (excerpt)", *(f"{n} rule" for n in names)]
        ex_headers[2] = f"headline ({headline_rules(b)})"
        title = f"{b.name}: replies whose verdict differs between rules (examples)"
        out.append(Section(title, ex_headers, ex_rows, ["verdict = value (answer)"], level=4))
        out += example_prompts(b.name, sens.examples)
    return out


def rule_gap(name: str, gap: RuleGap | None) -> list[Section]:
    """Why the headline and the robust rule's numbers differ (over a point): the counts and
    two replies that show it; none where they are that close."""
    if gap is None:
        return []
    title = f"{name}: why rules {gap.headline} and {gap.robust} differ"
    headers = ["sample", "reply (excerpt)", f"headline ({gap.headline})", f"{gap.robust} rule"]
    rows = [[e.id, e.reply, e.verdicts["headline"], e.verdicts[gap.robust]] for e in gap.examples]
    notes = [
        gap.sentence(),
        "verdict = value (answer); unscored = left out of the count (the aggregate's "
        "denominator), unlike 0",
    ]
    return [Section(title, headers, rows, notes, level=4)]


def example_prompts(name: str, examples: list[Example]) -> list[Section]:
    """What the model was asked in each example (its own table: the examples' table is as
    wide as there are rules); none where the records kept no prompt (older runs)."""
    rows = [[e.id, e.prompt] for e in examples if e.prompt is not None]
    if not rows:
        return []
    note = "the prompt as evalkit rendered it (records: field prompt), before the chat template"
    title = f"{name}: what the model was asked in these examples"
    return [Section(title, ["sample", "prompt (excerpt)"], rows, [note], level=4)]


def _raised(verdict: RuleVerdict | None) -> bool:
    return verdict is not None and verdict.error is not None


def rule_failed_note(b: BenchmarkReport, rule: str, shown: int = 10) -> str:
    """The samples on which another extraction rule raised (its ids), for the rule's owner."""
    ids = [
        r.id
        for r in b.records
        if r.status == "ok" and r.rules is not None and _raised(r.rules.get(rule))
    ]
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return (
        f"rule {rule} failed (raised) on {len(ids)} sample(s) ({', '.join(ids[:shown])}"
        f"{more}): left out of its score, not counted as 0 or as a flip"
    )


def references(run: RunReport) -> Section:
    """Every matched reference (all metrics) with its source and settings differences."""
    rows = [
        [
            r.benchmark,
            r.metric,
            r.model,
            f"{r.reference:g}",
            num(r.value),
            num(r.delta),
            f"±{r.tolerance:g}",
            r.verdict,
            ", ".join(r.settings_diff) or "as pinned",
            r.settings_text,
            r.source,
        ]
        for b in run.benchmarks.values()
        for r in b.references
    ]
    headers = [
        "benchmark",
        "metric",
        "model",
        "reference",
        "ours",
        "delta",
        "tolerance",
        "verdict",
        "our settings vs pinned",
        "reference settings",
        "source",
    ]
    return Section("Reference scores", headers, rows)


def frame_notes(run: RunReport) -> list[str]:
    """Per benchmark: the frames the model saw (count, size) and the budget that set the
    size, which can be far below ``max_pixels`` when the total-pixel budget caps it."""
    from evalkit.rundir import RunDir
    from evalkit.video.budget import describe, read_frames

    seen = read_frames(RunDir(run.path).frames_path)
    return [
        f"{name}: frames as run: {describe(seen[name])}" for name in run.benchmarks if name in seen
    ]


def data_notes(run: RunReport) -> list[str]:
    """Per benchmark: the data it read (release and commit, a hash of its annotations)."""
    data = run.manifest.data
    return [f"{name}: data {data[name].describe()}" for name in run.benchmarks if name in data]


def settings(run: RunReport) -> Section:
    """The settings that change results, from config.json."""
    rc, manifest = run.result_config, run.manifest
    rows = [
        ["model", rc.model],
        ["model hash", rc.model_hash],
        *([["model commit", rc.model_revision]] if rc.model_revision else []),
        ["engine", f"{rc.engine} {rc.engine_options or ''}".strip()],
        ["prompt variant", rc.variant or "each benchmark's pinned one"],
        ["fingerprint", manifest.fingerprint],
        ["created", str(manifest.created)],
        ["versions", ", ".join(f"{k} {v}" for k, v in manifest.versions.items())],
    ]
    family = manifest.family or {}
    if family:
        rows.append(["model family", family_line(family)])
    for b in run.benchmarks.values():
        f = b.settings.get("frames") or {}
        frames = ", ".join(
            f"{k}={f[k]}"
            for k in ("fps", "nframes", "max_frames", "max_pixels", "total_pixels", "size")
            if k in f
        )
        if f.get("sampling"):
            frames += f", sampling={f['sampling']}"
        origin = (family.get("frames_from") or {}).get(b.name)
        if origin:
            frames += " (" + ", ".join(f"{k} from {v}" for k, v in origin.items()) + ")"
        variant, cap = b.settings.get("prompt_variant"), b.settings.get("max_tokens")
        if b.settings.get("engine") == "external":
            prompt = b.settings.get("prompt") or "not used: predictions made elsewhere"
            unknown = "frames and max_tokens unknown (predictions made elsewhere)"
            rows.append([b.name, f"variant {variant}, prompt {prompt}; {unknown}"])
            continue
        rows.append([b.name, f"{frames}; variant={variant}; max_tokens={cap}"])
        if b.name in manifest.data:
            rows.append([f"{b.name} data", manifest.data[b.name].describe()])
    return Section("Settings", ["setting", "value"], rows)


def family_line(family: dict[str, Any]) -> str:
    """The model family as a run recorded it, in one line: name, feed, reference and source."""
    size = family.get("size")
    grid = f"fixed {size[0]}x{size[1]}" if size else family.get("grid", "?")
    audio = f"; audio {family['audio']}" if family.get("audio") else ""
    return (
        f"{family.get('title')} ({family.get('model_type')}): {family.get('feed')} input, "
        f"frames on the {grid} grid{audio}; reference {family.get('reference')} "
        f"[{family.get('reference_source')}]; precedence: {family.get('precedence')}"
    )


def run_utilisation(run: RunReport) -> tuple[Section, dict[str, Utilisation | None]]:
    """Engine utilisation per benchmark (benchmarks run one after another)."""
    per: dict[str, Utilisation | None] = {
        name: utilisation(spans(b.records, name)) for name, b in run.benchmarks.items()
    }
    rows = [
        [
            name,
            str(u.samples),
            num(u.wall_s, 1),
            num(100 * u.busy_fraction, 1),
            num(u.mean_in_flight),
            str(u.max_in_flight),
            num(u.samples_per_s),
            num(u.median_io_s, 3),
            num(u.median_queued_s, 3),
            num(u.median_prefill_s, 3),
            num(u.median_decode_s, 3),
        ]
        for name, u in per.items()
        if u is not None
    ]
    headers = [
        "benchmark",
        "samples",
        "wall s",
        "engine busy %",
        "mean in flight",
        "max in flight",
        "samples/s",
        "median IO s",
        "median queued s",
        "median prefill s",
        "median decode s",
    ]
    notes = [
        "engine busy = share of wall time with at least one request in the engine; "
        "mean in flight = time-averaged requests in the engine"
    ]
    started = StartupTimes.read(run.path)
    if started is not None:  # waited before the first sample: not in wall s nor samples/s
        notes.append(f"{started.describe()}, before the first sample (not in wall s)")
    return Section("Pipeline and engine utilisation", headers, rows, notes), per


def comparison(a: RunReport, b: RunReport, comps: list[Comparison]) -> Section:
    """B - A per benchmark with the paired bootstrap interval and a verdict."""
    rows = [
        [
            c.benchmark,
            num(c.a),
            num(c.b),
            num(c.delta),
            f"[{num(c.ci_low)}, {num(c.ci_high)}]",
            c.verdict,
            str(c.n_common),
            f"{c.n_only_a}/{c.n_only_b}",
        ]
        for c in comps
    ]
    headers = [
        "benchmark",
        "A",
        "B",
        "B - A (common)",
        "95% CI",
        "verdict",
        "common samples",
        "only A/only B",
    ]
    notes = [
        f"A = {a.run_id} ({a.model}), B = {b.run_id} ({b.model})",
        "delta and interval over the samples both runs hold, by a seeded paired bootstrap "
        "of the official aggregate; 'not significant' = the 95% interval includes 0",
    ]
    only_a = [n for n in a.benchmarks if n not in b.benchmarks]
    only_b = [n for n in b.benchmarks if n not in a.benchmarks]
    if only_a or only_b:
        notes.append(
            f"not compared (in one run only): A {', '.join(only_a) or '-'}; "
            f"B {', '.join(only_b) or '-'}"
        )
    diff = config_diff(a.result_config.dump(), b.result_config.dump())
    notes.append("settings that differ: " + ("; ".join(diff) if diff else "none"))
    return Section(f"Comparison: {b.run_id} vs {a.run_id}", headers, rows, notes, level=2)
