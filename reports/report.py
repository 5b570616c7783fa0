"""Build a whole report from run directories: load, check references, compare, render."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reports import sections as S
from reports.load import FailedPolicy, RunReport, load_run
from reports.reference import verdicts
from reports.render import comparison_dict, run_dict, to_html, to_markdown, to_terminal
from reports.stats import Comparison, compare
from reports.timeline import spans

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
    files: dict[str, Path] = field(default_factory=dict)


def build_report(
    paths: list[str | Path],
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
    data: dict[str, Any] = {"runs": [], "comparisons": [], "tolerance": tolerance}
    for run in runs:
        util_sec, util = S.run_utilisation(run)
        sections.append(S.summary(run))
        for b in run.benchmarks.values():
            sections += S.breakdowns(b)
        sections += [S.references(run), util_sec, S.settings(run)]
        data["runs"].append(run_dict(run, util))
    for run_a, run_b, rows in comps:
        sections.append(S.comparison(run_a, run_b, rows))
        data["comparisons"].append(comparison_dict(run_a, run_b, rows))
    return Report(runs, comps, sections, data)


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
        files["md"].write_text(to_markdown(title, report.sections, images, out))
    if "html" in formats:
        files["html"] = out / "report.html"
        files["html"].write_text(to_html(title, report.sections, images, out))
    if "json" in formats:
        files["json"] = out / "report.json"
        files["json"].write_text(json.dumps(report.data, indent=2, default=str))
    for i, (_, path) in enumerate(images):
        files[f"png{i}"] = path
    report.files = files
    return files


def make_plots(report: Report, folder: Path) -> list[tuple[str, Path]]:
    """Every figure of the report as (caption, PNG path)."""
    from reports.plots import plot_compare, plot_scores, plot_timeline

    images = []
    for run in report.runs:
        tag = _slug(run.run_id)
        images.append(
            (f"{run.run_id}: scores vs reference", plot_scores(run, folder / f"scores_{tag}.png"))
        )
        if any(spans(b.records, b.name) for b in run.benchmarks.values()):
            images.append(
                (
                    f"{run.run_id}: pipeline stage timeline and engine occupancy",
                    plot_timeline(run, folder / f"timeline_{tag}.png"),
                )
            )
    for a, b, rows in report.comparisons:
        if rows:
            path = folder / f"compare_{_slug(b.run_id)}_vs_{_slug(a.run_id)}.png"
            images.append((f"{b.run_id} vs {a.run_id}", plot_compare(a, b, rows, path)))
    return images


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", s)
