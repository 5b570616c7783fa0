"""The sweep report: each benchmark's official score against the settings of a sweep.

A sweep directory (``evalkit sweep``) holds ``sweep.json`` (axes, settings, each spec's
pinned values) and one ordinary run directory per setting. Each run is read by the run
report's loader, so a setting's headline is exactly what ``evalkit report`` prints for
that run. Settings are then compared on the same samples: those with a scored record under
every setting that has a run, resampled with one draw for all settings (whole clusters of
the benchmark's grouping), which gives each score and each delta against the pinned
setting a paired 95% interval. Each axis's main effect is the spread of the mean score
over its values, the other axes averaged out.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evalkit.bench.aggregations import Scored
from evalkit.errors import DataError

from .bootstrap import bootstrap_counts, cluster_key, linear_form
from .load import load_run
from .model import BenchmarkReport, FailedPolicy, RunReport
from .reference import verdicts
from .sections import Section, num
from .uncertainty import AggFn, Clusters, _group_field, _nan, overall_fn, percentile_ci

if TYPE_CHECKING:
    from rich.console import Console

AxisValue = str | int | float | bool | None
"""A value of a swept key, as sweep.json holds it (a JSON scalar)."""

MANIFEST = "sweep.json"
KIND = "evalkit-sweep"


@dataclass
class Setting:
    """One setting of the sweep and its run (None when the run is missing or unreadable)."""

    id: str
    values: dict[str, Any]
    run_name: str
    run: RunReport | None = None
    problem: str | None = None
    """Why the setting has no numbers (missing run, no results), for people."""


@dataclass
class Row:
    """One setting of one benchmark."""

    setting: Setting
    headline: float | None = None
    """The run's official number over all its samples (as ``evalkit report`` shows it)."""
    status: str = "ok"
    paired: float | None = None
    """The official number over the common samples."""
    ci: tuple[float | None, float | None] = (None, None)
    delta: float | None = None
    """paired - the pinned setting's paired number (points)."""
    delta_ci: tuple[float | None, float | None] = (None, None)
    pinned: bool = False


@dataclass
class Effect:
    """An axis's main effect: from one value's mean score to another's."""

    axis: str
    low: AxisValue
    high: AxisValue
    """The values with the lowest and highest mean score, in the axis's order (low first)."""
    delta: float
    """mean(high) - mean(low) over the settings holding each (points)."""
    ci: tuple[float | None, float | None]

    @property
    def spread(self) -> float:
        """How far the axis moves the score (points)."""
        return abs(self.delta)


@dataclass
class BenchSweep:
    """One benchmark across the sweep's settings."""

    name: str
    rows: list[Row]
    pinned_id: str | None
    pinned_by_spec: bool
    n_common: int = 0
    n_any: int = 0
    """Samples scored under at least one setting."""
    method: str = ""
    effects: list[Effect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sentence: str = ""
    reference: tuple[str, float] | None = None
    """(model, published overall score) when the run's model has a reference."""


@dataclass
class SweepReport:
    """A whole sweep: its manifest, its settings' runs, each benchmark across them."""

    path: Path
    axes: dict[str, list[Any]]
    settings: list[Setting]
    benchmarks: list[BenchSweep]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "path": str(self.path),
            "axes": self.axes,
            "settings": [
                {"id": s.id, "values": s.values, "run": s.run_name, "problem": s.problem}
                for s in self.settings
            ],
            "benchmarks": [
                {
                    "name": b.name,
                    "pinned": b.pinned_id,
                    "pinned_by_spec": b.pinned_by_spec,
                    "n_common": b.n_common,
                    "method": b.method,
                    "rows": [
                        {
                            "setting": r.setting.id,
                            "headline": r.headline,
                            "status": r.status,
                            "paired": r.paired,
                            "ci": list(r.ci),
                            "delta": r.delta,
                            "delta_ci": list(r.delta_ci),
                        }
                        for r in b.rows
                    ],
                    "effects": [
                        {
                            "axis": e.axis,
                            "low": e.low,
                            "high": e.high,
                            "delta": e.delta,
                            "ci": list(e.ci),
                        }
                        for e in b.effects
                    ],
                    "sentence": b.sentence,
                    "notes": b.notes,
                }
                for b in self.benchmarks
            ],
        }


def is_sweep(path: str | Path) -> bool:
    """True when ``path`` is a sweep directory (holds ``sweep.json``)."""
    return (Path(path) / MANIFEST).is_file()


def read_manifest(path: Path) -> dict[str, Any]:
    """``sweep.json``, checked; a missing or malformed one is a one-line DataError."""
    file = path / MANIFEST
    if not file.is_file():
        raise DataError(f"{file}: no sweep manifest (not a sweep directory)")
    try:
        doc = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"{file}: not valid JSON ({why})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise DataError(f"{file}: not an evalkit sweep manifest (kind is not {KIND!r})")
    checks = {
        "axes": dict,
        "settings": list,
        "pinned": dict,
        "benchmarks": list,
    }
    for key, kind in checks.items():
        if not isinstance(doc.get(key), kind):
            raise DataError(f"{file}: field {key!r} is missing or not a {kind.__name__}")
    for i, s in enumerate(doc["settings"]):
        if not (
            isinstance(s, dict)
            and isinstance(s.get("id"), str)
            and isinstance(s.get("run"), str)
            and isinstance(s.get("values"), dict)
            and set(s["values"]) == set(doc["axes"])
        ):
            raise DataError(f"{file}: settings[{i}] needs an id, a run and a value for every axis")
    return doc


def load_sweep(
    path: str | Path,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    tolerance: float = 1.0,
    model_name: str | None = None,
    failed: FailedPolicy = "zero",
) -> SweepReport:
    """Read the manifest and every setting's run; compare the settings per benchmark."""
    root = Path(path)
    doc = read_manifest(root)
    settings = [Setting(s["id"], s["values"], s["run"]) for s in doc["settings"]]
    for s in settings:
        run_dir = root / s.run_name
        if not (run_dir / "config.json").is_file():
            s.problem = f"missing (no run directory {s.run_name})"
            continue
        try:
            s.run = load_run(run_dir, failed=failed, bootstrap=bootstrap, seed=seed)
        except DataError as exc:
            s.problem = f"incomplete ({exc})"
    benches = []
    # a sweep of a --data file recorded no benchmarks before they were taken from its
    # runs: those are read from the runs themselves
    names = doc["benchmarks"] or list(
        dict.fromkeys(b for s in settings if s.run is not None for b in s.run.benchmarks)
    )
    for name in names:
        pinned = doc["pinned"].get(name) or doc["pinned"].get(name.split(":")[0]) or {}
        bench = _bench(name, settings, pinned, bootstrap=bootstrap, seed=seed)
        if doc.get("zip") is True:
            bench.sentence = _zipped(bench)
        _reference_and_sensitivity(bench, tolerance, model_name)
        benches.append(bench)
    return SweepReport(root, doc["axes"], settings, benches)


def _same(a: object, b: object) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(float(a) - float(b)) < 1e-9
    return bool(a == b)


def _bench_of(run: RunReport | None, name: str) -> BenchmarkReport | None:
    if run is None:
        return None
    return run.benchmarks.get(name) or run.benchmarks.get(name.split(":")[0])


def _bench(
    name: str, settings: list[Setting], pinned: dict[str, Any], *, bootstrap: int, seed: int
) -> BenchSweep:
    rows = [Row(s) for s in settings]
    match = [
        s.id
        for s in settings
        if pinned and all(k in pinned and _same(v, pinned[k]) for k, v in s.values.items())
    ]
    pinned_id = match[0] if match else (settings[0].id if settings else None)
    out = BenchSweep(name, rows, pinned_id, bool(match))
    benches: list[BenchmarkReport] = []
    for row in rows:
        row.pinned = row.setting.id == pinned_id
        b = _bench_of(row.setting.run, name)
        if row.setting.problem:
            row.status = row.setting.problem
        elif b is None:
            row.status = f"missing (the run has no {name} results)"
        else:
            row.headline = b.overall
            if b.counts.partial:
                row.status = f"incomplete ({b.counts.total} of {b.counts.available} samples)"
            benches.append(b)
    present = [
        r for r in rows if _bench_of(r.setting.run, name) is not None and not r.setting.problem
    ]
    if not benches:
        out.notes.append(f"{name}: no setting has results")
        return out
    ids = [{s.sample.id for s in b.scored if s.value is not None} for b in benches]
    common = set.intersection(*ids)
    out.n_common, out.n_any = len(common), len(set.union(*ids))
    first = benches[0]
    gf = _group_field(first)
    order = [s for s in first.scored if s.sample.id in common]
    per = []
    for b in benches:
        by = {s.sample.id: s for s in b.scored}
        per.append([by[s.sample.id] for s in order])
    fns = [overall_fn(b) for b in benches]
    points = np.array([_nan(fn(sc)) for fn, sc in zip(fns, per, strict=True)])
    reps, out.method = _replicates(benches, per, fns, gf, bootstrap, seed)
    p_index = next((i for i, r in enumerate(present) if r.pinned), None)
    for i, row in enumerate(present):
        row.paired = None if np.isnan(points[i]) else float(points[i])
        row.ci = percentile_ci(reps[i]) if reps.size else (None, None)
        if p_index is not None and row.paired is not None and not np.isnan(points[p_index]):
            row.delta = float(points[i] - points[p_index])
            row.delta_ci = percentile_ci(reps[i] - reps[p_index]) if reps.size else (None, None)
    out.effects = _effects(present, points, reps)
    out.sentence = _sentence(name, out.effects)
    out.notes += _bench_notes(out, present, rows)
    return out


def _replicates(
    benches: list[BenchmarkReport],
    per: list[list[Scored]],
    fns: list[AggFn],
    gf: str | None,
    n_boot: int,
    seed: int,
) -> tuple[np.ndarray, str]:
    """(settings, replicates) official numbers, every setting under the same draws."""
    keys = list(dict.fromkeys(cluster_key(s, gf) for s in per[0]))
    unit = f"clusters by {gf}" if gf else "samples"
    if len(keys) < 2 or n_boot < 2:
        return np.empty((len(per), 0)), "no interval (fewer than 2 common clusters or no bootstrap)"
    rng = np.random.default_rng(seed)
    forms = [
        linear_form(b.spec, sc, gf, keys, fn) for b, sc, fn in zip(benches, per, fns, strict=True)
    ]
    if all(f is not None for f in forms):
        counts = bootstrap_counts(rng, n_boot, len(keys))
        reps = np.stack([np.concatenate([f(c) for c in counts]) for f in forms if f is not None])
        return reps, f"paired bootstrap ({n_boot}, {unit})"
    clusters = [Clusters(sc, gf) for sc in per]
    out = np.empty((len(per), n_boot))
    for j in range(n_boot):
        draws = rng.integers(0, len(keys), len(keys))
        for i, (cl, fn) in enumerate(zip(clusters, fns, strict=True)):
            out[i, j] = _nan(fn(cl.resample(draws)))
    return out, f"paired bootstrap ({n_boot}, {unit}, official aggregate per replicate)"


def _effects(rows: list[Row], points: np.ndarray, reps: np.ndarray) -> list[Effect]:
    """Each axis's main effect: the mean score per value (other axes averaged out), from
    the lowest value's mean to the highest's, largest first."""
    if not rows:
        return []
    out = []
    for axis in rows[0].setting.values:
        values: list[AxisValue] = []
        for r in rows:
            v = r.setting.values[axis]
            if not any(_same(v, w) for w in values):
                values.append(v)
        if len(values) < 2:
            continue
        members = [
            [i for i, r in enumerate(rows) if _same(r.setting.values[axis], v)] for v in values
        ]
        means = [
            float(np.nanmean(points[m])) if not np.all(np.isnan(points[m])) else np.nan
            for m in members
        ]
        if any(np.isnan(means)):
            continue
        lo, hi = int(np.argmin(means)), int(np.argmax(means))
        # every value scoring the same: the axis's first and last values, never one twice
        a, b = sorted((lo, hi)) if lo != hi else (0, len(values) - 1)
        ci: tuple[float | None, float | None] = (None, None)
        if reps.size:
            with np.errstate(invalid="ignore"):
                contrast = reps[members[b]].mean(axis=0) - reps[members[a]].mean(axis=0)
            ci = percentile_ci(contrast)
        out.append(Effect(axis, values[a], values[b], means[b] - means[a], ci))
    return sorted(out, key=lambda e: -e.spread)


def _interval(ci: tuple[float | None, float | None], digits: int = 1) -> str:
    if ci[0] is None or ci[1] is None:
        return "[no interval]"
    return f"[{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


def _sentence(name: str, effects: list[Effect]) -> str:
    if not effects:
        return f"{name}: no axis has two values with scores to compare."
    e = effects[0]
    change = f"{e.low} -> {e.high} {e.delta:+.1f} points {_interval(e.ci)}."
    if e.spread == 0:  # the largest effect is none: every value of every axis scores alike
        return f"{name}: no swept setting moves the score: {e.axis} {change}"
    return f"{name}: {e.axis} moves the score most: {change}"


def _zipped(b: BenchSweep) -> str:
    """The sentence of a ``--zip`` sweep: its axes change together, so no one of them can
    be said to move the score."""
    if len(b.effects) < 2:
        return b.sentence
    e = b.effects[0]
    axes = ", ".join(x.axis for x in b.effects)
    return (
        f"{b.name}: the zipped axes {axes} change together (their effects cannot be told "
        f"apart): {e.axis} {e.low} -> {e.high} moves the score {e.delta:+.1f} points "
        f"{_interval(e.ci)}."
    )


def _bench_notes(b: BenchSweep, present: list[Row], rows: list[Row]) -> list[str]:
    notes = [
        f"paired: {b.n_common} sample(s) have a scored record under every setting with "
        f"results (of {b.n_any} scored under any); intervals: {b.method}, 95%",
    ]
    if b.pinned_by_spec:
        notes.append(f"pinned: {b.pinned_id} has the spec's pinned values; deltas are against it")
    else:
        notes.append(
            f"no setting has all the spec's pinned values: deltas are against the first "
            f"setting ({b.pinned_id})"
        )
    if not any(r.pinned for r in present):
        notes.append(f"the setting deltas are taken against ({b.pinned_id}) has no results")
    skipped = [r.setting.id for r in rows if r not in present]
    if skipped:
        notes.append(f"left out of the paired comparison (no results): {', '.join(skipped)}")
    return notes


def _reference_and_sensitivity(b: BenchSweep, tolerance: float, model_name: str | None) -> None:
    """The published reference and the extraction sensitivity, from the pinned setting's run."""
    row = next((r for r in b.rows if r.pinned), None)
    run = row.setting.run if row else None
    bench = _bench_of(run, b.name)
    if run is None or bench is None:
        return
    verdicts(run, tolerance, model_name)
    for c in bench.references:
        if c.metric == "overall":
            b.reference = (c.model, c.reference)
            b.notes.append(
                f"reference: {c.model} {c.reference:g} ({c.source}); pinned setting "
                f"{num(c.value)}, delta {num(c.delta)}"
            )
    sens = bench.sensitivity
    if sens is not None and len(sens.rows) > 1:
        parts = [
            f"{r.rule} {num(r.overall)}"
            + ("" if r.headline else f" ({num(r.delta)}, {r.changed} flips)")
            for r in sens.rows
        ]
        b.notes.append(f"extraction rules ({b.pinned_id}): " + "; ".join(parts))


MAX_AXIS_COLUMNS = 3
"""More varying axes than this share one column (``key=value, ...``): the table stays
inside a 1280 px page."""


def _columns(report: SweepReport) -> tuple[list[str], list[str], list[str]]:
    """(axis headers, the axes they show, notes): one column per axis that varies (or one
    column for all when many vary); an axis held at one value is a note, not a column."""
    varying = [a for a, vals in report.axes.items() if len({json.dumps(v) for v in vals}) > 1]
    fixed = [a for a in report.axes if a not in varying]
    notes = []
    if fixed and report.settings:
        held = ", ".join(f"{a}={report.settings[0].values.get(a)}" for a in fixed)
        notes.append(f"held at one value in every setting: {held}")
    if len(varying) > MAX_AXIS_COLUMNS:
        return ["values"], varying, notes
    return varying, varying, notes


def _cells(values: dict[str, Any], headers: list[str], axes: list[str]) -> list[str]:
    if headers == ["values"] and axes != ["values"]:
        return [", ".join(f"{a}={values.get(a)}" for a in axes)]
    return [str(values.get(a)) for a in axes]


def sections(report: SweepReport) -> list[Section]:
    """The sweep as titled tables with notes (rendered by ``reports.render``)."""
    heads, axes, held = _columns(report)
    overview = [
        [s.id, *_cells(s.values, heads, axes), s.run_name, s.problem or "ok"]
        for s in report.settings
    ]
    out = [
        Section(
            f"Sweep {report.path.name}",
            ["setting", *heads, "run", "status"],
            overview,
            [b.sentence for b in report.benchmarks if b.sentence] + held,
            level=2,
        )
    ]
    for b in report.benchmarks:
        rows = []
        for r in b.rows:
            rows.append(
                [
                    r.setting.id + (" (pinned)" if r.pinned else ""),
                    *_cells(r.setting.values, heads, axes),
                    num(r.headline),
                    num(r.paired),
                    _interval(r.ci, 2).replace("+", ""),
                    "" if r.pinned else num(r.delta) if r.delta is None else f"{r.delta:+.2f}",
                    "" if r.pinned else _interval(r.delta_ci, 2),
                    r.status,
                ]
            )
        headers = [
            "setting",
            *heads,
            "headline",
            "paired",
            "95% CI",
            "delta",
            "delta 95% CI",
            "status",
        ]
        effects = [
            f"main effect of {e.axis}: {e.low} -> {e.high} {e.delta:+.2f} points "
            + _interval(e.ci, 2)
            for e in b.effects
        ]
        notes = [b.sentence, *b.notes, *effects, *held]
        out.append(Section(f"{b.name}: score by setting", headers, rows, notes, level=3))
    return out


def render_terminal(
    sweep_dir: Path, *, bootstrap: int = 1000, seed: int = 0, width: int | None = None
) -> str:
    """The sweep report as terminal text (what ``evalkit sweep`` prints at its end), within
    ``width`` columns (default: the terminal's, ``COLUMNS``, else 100)."""
    from rich.console import Console

    from evalkit.textwidth import terminal_width

    from .render import to_terminal

    buf = io.StringIO()
    width = width or terminal_width()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    to_terminal(sections(load_sweep(sweep_dir, bootstrap=bootstrap, seed=seed)), console)
    return buf.getvalue()


def write_sweep_report(
    report: SweepReport, out: Path, formats: list[str], console: Console | None = None
) -> dict[str, Path]:
    """Print/write the requested formats (table, md, html, json) under ``out``."""
    from .render import to_html, to_markdown, to_terminal

    secs = sections(report)
    if "table" in formats:
        from rich.console import Console

        to_terminal(secs, console or Console())
    files: dict[str, Path] = {}
    if not {"md", "html", "json"} & set(formats):
        return files
    out.mkdir(parents=True, exist_ok=True)
    if {"md", "html"} & set(formats):
        for sec, b in zip(secs[1:], report.benchmarks, strict=True):
            path = out / "plots" / f"sweep_{_slug(b.name)}.png"
            caption = f"{b.name}: official score per setting (paired, 95% CI)"
            sec.figures.append((caption, plot_sweep(b, path)))
    title = f"evalkit sweep report: {report.path.name}"
    if "md" in formats:
        files["md"] = out / "report.md"
        files["md"].write_text(to_markdown(title, secs, out))
    if "html" in formats:
        files["html"] = out / "report.html"
        files["html"].write_text(to_html(title, secs, out))
    if "json" in formats:
        files["json"] = out / "report.json"
        files["json"].write_text(json.dumps(report.to_dict(), indent=2, default=str))
    return files


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", s)


def plot_sweep(b: BenchSweep, path: Path) -> Path:
    """The paired score per setting with its 95% interval, the pinned setting darker, the
    published reference as a dashed line; a setting without results says so."""
    from .plots import _pyplot, _save

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(b.rows) + 2), 3.8))
    for x, r in enumerate(b.rows):
        if r.paired is None:
            ax.text(x, 2, "no results", ha="center", va="bottom", rotation=90, color="#b00")
            continue
        lo, hi = r.ci
        err = None if lo is None or hi is None else [[r.paired - lo], [hi - r.paired]]
        colour = "#1a4d8f" if r.pinned else "#4c72b0"
        ax.bar(x, r.paired, 0.6, yerr=err, capsize=4, color=colour)
    if b.reference is not None:
        model, value = b.reference
        ax.axhline(value, color="#c44e52", linestyle="--", label=f"reference ({model}) {value:g}")
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    values = [r.setting.values for r in b.rows]
    varying = [
        a for a in (values[0] if values else {}) if len({json.dumps(v[a]) for v in values}) > 1
    ]
    shown = varying if len(varying) <= MAX_AXIS_COLUMNS else []  # else the table says them
    labels = [
        r.setting.id
        + (" (pinned)" if r.pinned else "")
        + "".join(f"\n{a.split('.', 1)[-1]}={r.setting.values[a]}" for a in shown)
        for r in b.rows
    ]
    ax.set_xticks(range(len(b.rows)), labels, fontsize=7)
    ax.set_ylim(0, 115)  # room for the legend above a full bar
    ax.set_ylabel("score (%)")
    ax.set_title(f"{b.name}: score by setting ({b.n_common} paired samples)", fontsize=10)
    return _save(fig, path)
