"""Build a whole report from run directories: load, check references, compare, render."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import replicas as R
from . import sections as S
from .load import load_run
from .model import FailedPolicy, RunReport
from .reference import verdicts
from .render import comparison_dict, run_dict, to_html, to_markdown, to_terminal
from .timeline import spans
from .uncertainty import Comparison, compare

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("table", "md", "html", "json")


@dataclass
class Report:
    """Everything a report holds, and the files it wrote."""

    runs: list[RunReport]
    comparisons: list[tuple[RunReport, RunReport, list[Comparison]]]
    sections: list[S.Section]
    data: dict[str, Any]
    anchors: dict[str, S.Section] = field(default_factory=dict)
    """Where each figure goes: ``scores:<i>``, ``timeline:<i>`` (run i), ``compare:<i>``."""
    files: dict[str, Path] = field(default_factory=dict)


def build_report(
    paths: Sequence[str | Path],
    *,
    tolerance: float = 1.0,
    model_name: str | None = None,
    failed: FailedPolicy = "zero",
    bootstrap: int = 1000,
    seed: int = 0,
) -> Report:
    """Load runs, match references, compare each later run with the first."""
    runs = [load_run(p, failed=failed, bootstrap=bootstrap, seed=seed) for p in paths]
    for run in runs:
        verdicts(run, tolerance, model_name)  # fills each benchmark's reference checks
    comps = []
    for other in runs[1:]:
        common = [n for n in runs[0].benchmarks if n in other.benchmarks]
        rows = [
            compare(runs[0].benchmarks[n], other.benchmarks[n], n_boot=max(bootstrap, 2), seed=seed)
            for n in common
        ]
        comps.append((runs[0], other, rows))
    sections: list[S.Section] = []
    anchors: dict[str, S.Section] = {}
    data: dict[str, Any] = {"runs": [], "comparisons": [], "tolerance": tolerance}
    for i, run in enumerate(runs):
        util_sec, util = S.run_utilisation(run)
        anchors[f"scores:{i}"] = S.summary(run)
        anchors[f"timeline:{i}"] = util_sec
        sections.append(anchors[f"scores:{i}"])
        sections += S.scorer_failures(run)
        for b in run.benchmarks.values():
            sections += S.breakdowns(b) + S.extraction(b)
        sections += [S.references(run), util_sec]
        run_data = run_dict(run, util)
        if lanes := R.lanes(run):  # runs with --replicas only: others stay as they were
            anchors[f"replicas:{i}"] = R.section(lanes)
            sections.append(anchors[f"replicas:{i}"])
            run_data["replicas"] = [ln.to_dict() for ln in lanes]
        sections.append(S.settings(run))
        data["runs"].append(run_data)
    sections += S.combined(runs)
    for i, (run_a, run_b, rows) in enumerate(comps):
        anchors[f"compare:{i}"] = S.comparison(run_a, run_b, rows)
        sections.append(anchors[f"compare:{i}"])
        data["comparisons"].append(comparison_dict(run_a, run_b, rows))
    return Report(runs, comps, sections, data, anchors)


def write_report(
    report: Report, out: Path, formats: list[str], console: Console | None = None
) -> dict[str, Path]:
    """Write the requested formats under ``out`` (PNG plots under ``out/plots``)."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; choose from {', '.join(FORMATS)}")
    if "table" in formats:
        from rich.console import Console

        to_terminal(report.sections, console or Console())
    files: dict[str, Path] = {}
    if not {"md", "html", "json"} & set(formats):
        return files
    out.mkdir(parents=True, exist_ok=True)
    images = make_plots(report, out / "plots") if {"md", "html"} & set(formats) else []
    title = "evalkit report: " + ", ".join(r.run_id for r in report.runs)
    if "md" in formats:
        files["md"] = out / "report.md"
        files["md"].write_text(to_markdown(title, report.sections, out))
    if "html" in formats:
        files["html"] = out / "report.html"
        files["html"].write_text(to_html(title, report.sections, out))
    if "json" in formats:
        files["json"] = out / "report.json"
        files["json"].write_text(json.dumps(report.data, indent=2, default=str))
    for i, (_, path) in enumerate(images):
        files[f"png{i}"] = path
    report.files = files
    return files


def make_plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Draw every figure, attach each to its section; returns (caption, PNG path) pairs."""
    from .plots import (
        compare_empty,
        plot_compare,
        plot_replicas,
        plot_scores,
        plot_timeline,
        scores_empty,
    )

    figures: list[tuple[str, str, Path]] = []  # (anchor, caption, path)
    for i, run in enumerate(report.runs):
        tag = f"{i}_{_slug(run.run_id)}"
        path = plot_scores(run, folder / f"scores_{tag}.png")
        caption = _captioned(f"{run.run_id}: official scores vs reference", scores_empty(run))
        figures.append((f"scores:{i}", caption, path))
        if any(spans(b.records, b.name) for b in run.benchmarks.values()):
            path = plot_timeline(run, folder / f"timeline_{tag}.png")
            caption = f"{run.run_id}: pipeline stages per sample and requests in the engine"
            figures.append((f"timeline:{i}", caption, path))
        lanes = R.lanes(run)
        if any(ln.segments for ln in lanes):
            path = plot_replicas(run, lanes, folder / f"replicas_{tag}.png")
            figures.append((f"replicas:{i}", f"{run.run_id}: per-replica timeline", path))
    for i, (a, b, rows) in enumerate(report.comparisons):
        if rows:
            path = folder / f"compare_{i}_{_slug(b.run_id)}_vs_{_slug(a.run_id)}.png"
            caption = _captioned(
                f"{b.run_id} vs {a.run_id}: scores and paired deltas", compare_empty(rows)
            )
            figures.append((f"compare:{i}", caption, plot_compare(a, b, rows, path)))
    for sec in report.anchors.values():
        sec.figures = []
    for anchor, caption, path in figures:
        report.anchors[anchor].figures.append((caption, path))
    return [(caption, path) for _, caption, path in figures]


def _captioned(caption: str, empty: str | None) -> str:
    """The caption, with why the chart holds no bar when it holds none."""
    return f"{caption} — {empty}" if empty else caption


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", s)
